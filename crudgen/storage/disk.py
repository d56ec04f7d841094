"""Storage in a directory: one file per resource and per revision, each written atomically."""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from crudgen.errors import DuplicateResource
from crudgen.metadata import ResourceMeta, Revision
from crudgen.serializers import Serializer, get_serializer
from crudgen.storage.base import ScannedStorage, Stored


@dataclass
class _DiskSession:
    storage: DiskStorage
    current: Stored

    def revision(self, revision_id: str) -> Revision | None:
        return self.storage.fetch_revision(self.current.meta.resource_id, revision_id)

    def save(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None = None) -> None:
        # The revision lands first: a crash between the two writes leaves an orphan revision, never a
        # resource pointing at a revision that does not exist.
        if new_revision is not None:
            self.storage._write_revision(new_revision)
        self.storage._write_resource(meta, data)


class DiskStorage(ScannedStorage):
    """Lists and counts read every resource file; use DjangoStorage where collections grow large."""

    def __init__(self, root: str | os.PathLike[str], serializer: str | Serializer = "json") -> None:
        self.namespace = None
        self.root = Path(root)
        self.serializer = get_serializer(serializer)
        self._resources_dir = self.root / "resources"
        self._revisions_dir = self.root / "revisions"
        self._resources_dir.mkdir(parents=True, exist_ok=True)
        self._revisions_dir.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.RLock()

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """A thread lock plus an flock, so other processes sharing the directory also queue."""
        with self._thread_lock, open(self.root / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _atomic_write(self, path: Path, payload: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_name, path)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    def _resource_path(self, resource_id: str) -> Path:
        return self._resources_dir / f"{quote(resource_id, safe='')}.{self.serializer.extension}"

    def _revision_dir(self, resource_id: str) -> Path:
        return self._revisions_dir / quote(resource_id, safe="")

    def _revision_path(self, resource_id: str, revision_id: str) -> Path:
        return self._revision_dir(resource_id) / f"{quote(revision_id, safe='')}.{self.serializer.extension}"

    def _write_resource(self, meta: ResourceMeta, data: dict[str, Any]) -> None:
        payload = self.serializer.dumps({"meta": meta.to_record(), "data": data})
        self._atomic_write(self._resource_path(meta.resource_id), payload)

    def _write_revision(self, revision: Revision) -> None:
        payload = self.serializer.dumps(revision.to_record())
        self._atomic_write(self._revision_path(revision.resource_id, revision.revision_id), payload)

    def _read_stored(self, path: Path) -> Stored:
        return self._stored(path.read_bytes())

    def _stored(self, raw: bytes) -> Stored:
        record = self.serializer.loads(raw)
        return Stored(ResourceMeta.from_record(record["meta"]), record["data"])

    @staticmethod
    def _bytes_if_there(path: Path) -> bytes | None:
        """The file's bytes, or None when there is none: no such file, or an id (from a URL, say)
        whose quoted name is longer than the filesystem allows, which no resource can have."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                return None
            raise

    def insert(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None:
        with self._exclusive():
            if self._resource_path(meta.resource_id).exists():
                raise DuplicateResource(f"resource {meta.resource_id} already exists")
            self._write_revision(revision)
            self._write_resource(meta, data)

    def fetch(self, resource_id: str) -> Stored | None:
        raw = self._bytes_if_there(self._resource_path(resource_id))
        return None if raw is None else self._stored(raw)

    def fetch_revision(self, resource_id: str, revision_id: str) -> Revision | None:
        raw = self._bytes_if_there(self._revision_path(resource_id, revision_id))
        return None if raw is None else Revision.from_record(self.serializer.loads(raw))

    @contextmanager
    def locked(self, resource_id: str) -> Iterator[_DiskSession | None]:
        with self._exclusive():
            current = self.fetch(resource_id)
            yield _DiskSession(self, current) if current is not None else None

    def _all(self) -> list[Stored]:
        return [self._read_stored(path) for path in self._resources_dir.glob(f"*.{self.serializer.extension}")]

    def _history(self, resource_id: str) -> list[Revision]:
        directory = self._revision_dir(resource_id)
        if not directory.exists():
            return []
        revisions = [
            Revision.from_record(self.serializer.loads(path.read_bytes()))
            for path in directory.glob(f"*.{self.serializer.extension}")
        ]
        return sorted(revisions, key=lambda r: r.number)

    def revisions(self, resource_id: str, offset: int, limit: int) -> tuple[list[Revision], int]:
        history = self._history(resource_id)[::-1]
        return history[offset : offset + limit], len(history)

    def export(self) -> Iterator[tuple[Stored, list[Revision]]]:
        for stored in sorted(self._all(), key=lambda s: (s.meta.created_time, s.meta.resource_id)):
            yield stored, self._history(stored.meta.resource_id)

    def _replace_held(self, stored: Stored, revisions: list[Revision]) -> None:
        directory = self._revision_dir(stored.meta.resource_id)
        keep = {self._revision_path(r.resource_id, r.revision_id) for r in revisions}
        if directory.exists():
            for stale in directory.iterdir():
                if stale not in keep:
                    stale.unlink()
        for revision in revisions:
            self._write_revision(revision)
        self._write_resource(stored.meta, stored.data)
