"""Dump and load: every resource with its metadata and all revisions, as JSON lines, across any storages."""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from enum import StrEnum
from typing import IO, TYPE_CHECKING, Any

from crudgen.errors import DuplicateResource
from crudgen.metadata import ResourceMeta, Revision
from crudgen.storage.base import Storage, Stored

if TYPE_CHECKING:
    from crudgen.crud import SingleModelCRUD

DUMP_FORMAT = "crudgen-dump"
DUMP_VERSION = 1


class OnDuplicate(StrEnum):
    OVERWRITE = "overwrite"
    SKIP = "skip"
    ERROR = "error"


@dataclass
class LoadReport:
    loaded: int = 0
    overwritten: int = 0
    skipped: int = 0


def _write_line(stream: IO[Any], record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    stream.write(line if _is_text(stream) else line.encode())


def _is_text(stream: IO[Any]) -> bool:
    if isinstance(stream, io.TextIOBase):
        return True
    if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
        return False
    return hasattr(stream, "encoding")


def dump(cruds: Mapping[str, SingleModelCRUD], stream: IO[Any]) -> int:
    """Write a header line then one line per resource; returns how many resources were written."""
    _write_line(stream, {"format": DUMP_FORMAT, "version": DUMP_VERSION, "models": sorted(cruds)})
    written = 0
    for name, crud in cruds.items():
        for stored, revisions in crud.storage.export():
            _write_line(
                stream,
                {
                    "resource_name": name,
                    "meta": stored.meta.to_record(),
                    "data": stored.data,
                    "revisions": [revision.to_record() for revision in revisions],
                },
            )
            written += 1
    return written


def _lines(stream: IO[Any]) -> Iterator[dict[str, Any]]:
    for raw in stream:
        line = raw.decode() if isinstance(raw, bytes) else raw
        if line.strip():
            yield json.loads(line)


def load(
    cruds: Mapping[str, SingleModelCRUD], stream: IO[Any], on_duplicate: str = OnDuplicate.OVERWRITE
) -> LoadReport:
    """Read a dump into the registered models; `on_duplicate` decides about ids that already exist.

    A refused load changes nothing: the whole dump is checked (header, models, duplicates under
    `error`) before the first write, and the writes run inside each storage's unit of work.
    The checked records wait in a spooled temp file, so a large dump is not held in memory.
    """
    policy = OnDuplicate(on_duplicate)
    records = _lines(stream)
    header = next(records, None)
    if not header or header.get("format") != DUMP_FORMAT or header.get("version") != DUMP_VERSION:
        raise ValueError("not a crudgen dump (missing or unknown header line)")
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY_BYTES, mode="w+", encoding="utf-8") as checked:
        storages = _check_records(cruds, records, policy, checked)
        checked.seek(0)
        with ExitStack() as units_of_work:
            for storage in storages:
                units_of_work.enter_context(storage.atomic())
            return _write_records(cruds, _lines(checked), policy)


_SPOOL_IN_MEMORY_BYTES = 8 * 1024 * 1024


def _check_records(
    cruds: Mapping[str, SingleModelCRUD], records: Iterator[dict[str, Any]], policy: OnDuplicate, checked: IO[str]
) -> list[Storage]:
    storages: dict[int, Storage] = {}
    for record in records:
        crud = cruds.get(record["resource_name"])
        if crud is None:
            raise ValueError(f"dump holds resources of {record['resource_name']!r}, which is not registered")
        resource_id = ResourceMeta.from_record(record["meta"]).resource_id
        if policy is OnDuplicate.ERROR and crud.storage.exists(resource_id):
            raise DuplicateResource(f"{record['resource_name']} {resource_id} already exists")
        storages[id(crud.storage)] = crud.storage
        _write_line(checked, record)
    return list(storages.values())


def _write_records(
    cruds: Mapping[str, SingleModelCRUD], records: Iterator[dict[str, Any]], policy: OnDuplicate
) -> LoadReport:
    report = LoadReport()
    for record in records:
        crud = cruds[record["resource_name"]]
        meta = ResourceMeta.from_record(record["meta"])
        exists = crud.storage.exists(meta.resource_id)
        if exists and policy is OnDuplicate.SKIP:
            report.skipped += 1
            continue
        revisions = [Revision.from_record(item) for item in record["revisions"]]
        crud.storage.replace(Stored(meta, record["data"]), revisions)
        report.overwritten += int(exists)
        report.loaded += 1
    return report
