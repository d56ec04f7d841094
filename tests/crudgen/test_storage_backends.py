"""Serializers, the file layout of DiskStorage, and what every backend stores on a write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from crudgen import CRUDSystem, DiskStorage, MemoryStorage, MetadataConfig, SingleModelCRUD, get_serializer
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Workflow


@pytest.mark.parametrize("name", ["json", "pickle", "msgpack"])
def test_each_serializer_round_trips_a_record(name: str) -> None:
    # Given the serializer of that name
    serializer = get_serializer(name)
    # When a record with numbers, None, booleans and non-ASCII text goes through it
    record = {"a": [1, 2.5, None, True], "b": {"c": "ü"}}
    # Then it comes back equal
    assert serializer.loads(serializer.dumps(record)) == record


def test_an_unknown_serializer_name_is_refused() -> None:
    # Given no serializer called yaml
    # When one is asked for by that name
    # Then it is refused with a message saying so
    with pytest.raises(ValueError, match="unknown serializer"):
        get_serializer("yaml")


@pytest.mark.parametrize("name", ["json", "pickle", "msgpack"])
def test_disk_storage_writes_one_file_per_resource_and_revision(tmp_path: Path, name: str) -> None:
    # Given a workflow on disk storage
    crud = SingleModelCRUD(Workflow, DiskStorage(tmp_path, serializer=name), "workflow")
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    # When it is patched once
    crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "x"}])
    # Then one resource file, two revision files and no temporary file remain
    assert len(list((tmp_path / "resources").glob(f"*.{name}"))) == 1
    assert len(list((tmp_path / "revisions").rglob(f"*.{name}"))) == 2
    assert not list(tmp_path.rglob(".tmp-*"))


def test_disk_storage_reopened_on_the_same_directory_sees_the_data(tmp_path: Path) -> None:
    # Given a workflow written by one DiskStorage
    rid = SingleModelCRUD(Workflow, DiskStorage(tmp_path), "workflow").create({"name": "w", "steps": []})["resource_id"]
    # When another DiskStorage opens the same directory
    reopened = SingleModelCRUD(Workflow, DiskStorage(tmp_path), "workflow")
    # Then it reads the workflow
    assert reopened.get_data(rid)["name"] == "w"


@pytest.mark.parametrize("name", ["json", "pickle", "msgpack"])
def test_memory_storage_returns_copies_not_references(name: str) -> None:
    # Given a workflow in memory storage
    crud = SingleModelCRUD(Workflow, MemoryStorage(serializer=name), "workflow")
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    # When a caller mutates the data it read
    crud.get_data(rid)["steps"].append("mutated")
    # Then the stored data is unchanged
    assert crud.get_data(rid)["steps"] == []


@dataclass
class SignedNote:
    text: str
    updated_by: str | None = None


def test_a_field_named_updated_by_holds_the_writer_of_the_current_revision(
    storage_factory: Callable[[str], Storage],
) -> None:
    # Given a model with an `updated_by` field under user tracking, created by alice
    crud_system = CRUDSystem(storage_factory=storage_factory, metadata_config=MetadataConfig.with_user_tracking())
    crud = crud_system.register_model(SignedNote)
    rid = crud.create({"text": "draft"}, user="alice")["resource_id"]
    # When bob changes the text, then carol writes the same text again
    crud.patch(rid, [{"op": "replace", "path": "/text", "value": "final"}], user="bob")
    crud.update(rid, {"text": "final"}, user="carol")
    # Then the data names bob, and carol's identical text made no new revision
    assert crud.get_data(rid) == {"text": "final", "updated_by": "bob"}
    assert crud.list_revisions(rid).total == 2
