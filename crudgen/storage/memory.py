"""In-process storage; records are kept serialized so callers can never mutate stored state by reference."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from crudgen.errors import DuplicateResource
from crudgen.metadata import ResourceMeta, Revision
from crudgen.serializers import Serializer, get_serializer
from crudgen.storage.base import ScannedStorage, Stored


@dataclass
class _MemorySession:
    storage: MemoryStorage
    current: Stored

    def revision(self, revision_id: str) -> Revision | None:
        return self.storage.fetch_revision(self.current.meta.resource_id, revision_id)

    def save(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None = None) -> None:
        self.storage._write(meta, data, new_revision)


class MemoryStorage(ScannedStorage):
    def __init__(self, namespace: str | None = None, serializer: str | Serializer = "pickle") -> None:
        self.namespace = namespace
        self.serializer = get_serializer(serializer)
        self._resources: dict[str, bytes] = {}
        self._revisions: dict[str, dict[str, bytes]] = {}
        self._lock = threading.RLock()

    def _encode_stored(self, meta: ResourceMeta, data: dict[str, Any]) -> bytes:
        return self.serializer.dumps({"meta": meta.to_record(), "data": data})

    def _decode_stored(self, raw: bytes) -> Stored:
        record = self.serializer.loads(raw)
        return Stored(ResourceMeta.from_record(record["meta"]), record["data"])

    def _write(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None) -> None:
        with self._lock:
            self._resources[meta.resource_id] = self._encode_stored(meta, data)
            if new_revision is not None:
                revisions = self._revisions.setdefault(meta.resource_id, {})
                revisions[new_revision.revision_id] = self.serializer.dumps(new_revision.to_record())

    def insert(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None:
        with self._lock:
            if meta.resource_id in self._resources:
                raise DuplicateResource(f"resource {meta.resource_id} already exists")
            self._write(meta, data, revision)

    def fetch(self, resource_id: str) -> Stored | None:
        raw = self._resources.get(resource_id)
        return self._decode_stored(raw) if raw is not None else None

    def fetch_revision(self, resource_id: str, revision_id: str) -> Revision | None:
        raw = self._revisions.get(resource_id, {}).get(revision_id)
        return Revision.from_record(self.serializer.loads(raw)) if raw is not None else None

    @contextmanager
    def locked(self, resource_id: str) -> Iterator[_MemorySession | None]:
        with self._lock:
            current = self.fetch(resource_id)
            yield _MemorySession(self, current) if current is not None else None

    def _all(self) -> list[Stored]:
        with self._lock:
            raws = list(self._resources.values())
        return [self._decode_stored(raw) for raw in raws]

    def _history(self, resource_id: str) -> list[Revision]:
        with self._lock:
            raws = list(self._revisions.get(resource_id, {}).values())
        return sorted((Revision.from_record(self.serializer.loads(raw)) for raw in raws), key=lambda r: r.number)

    def revisions(self, resource_id: str, offset: int, limit: int) -> tuple[list[Revision], int]:
        history = self._history(resource_id)[::-1]
        return history[offset : offset + limit], len(history)

    def export(self) -> Iterator[tuple[Stored, list[Revision]]]:
        for stored in sorted(self._all(), key=lambda s: (s.meta.created_time, s.meta.resource_id)):
            yield stored, self._history(stored.meta.resource_id)

    def _exclusive(self) -> AbstractContextManager[bool]:
        return self._lock

    def _replace_held(self, stored: Stored, revisions: list[Revision]) -> None:
        self._resources[stored.meta.resource_id] = self._encode_stored(stored.meta, stored.data)
        self._revisions[stored.meta.resource_id] = {
            revision.revision_id: self.serializer.dumps(revision.to_record()) for revision in revisions
        }
