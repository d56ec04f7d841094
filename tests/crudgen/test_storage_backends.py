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
    serializer = get_serializer(name)
    record = {"a": [1, 2.5, None, True], "b": {"c": "ü"}}
    assert serializer.loads(serializer.dumps(record)) == record


def test_an_unknown_serializer_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown serializer"):
        get_serializer("yaml")


@pytest.mark.parametrize("name", ["json", "pickle", "msgpack"])
def test_disk_storage_writes_one_file_per_resource_and_revision(tmp_path: Path, name: str) -> None:
    crud = SingleModelCRUD(Workflow, DiskStorage(tmp_path, serializer=name), "workflow")
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "x"}])
    assert len(list((tmp_path / "resources").glob(f"*.{name}"))) == 1
    assert len(list((tmp_path / "revisions").rglob(f"*.{name}"))) == 2
    assert not list(tmp_path.rglob(".tmp-*"))


def test_disk_storage_reopened_on_the_same_directory_sees_the_data(tmp_path: Path) -> None:
    rid = SingleModelCRUD(Workflow, DiskStorage(tmp_path), "workflow").create({"name": "w", "steps": []})["resource_id"]
    reopened = SingleModelCRUD(Workflow, DiskStorage(tmp_path), "workflow")
    assert reopened.get_data(rid)["name"] == "w"


@pytest.mark.parametrize("name", ["json", "pickle", "msgpack"])
def test_memory_storage_returns_copies_not_references(name: str) -> None:
    crud = SingleModelCRUD(Workflow, MemoryStorage(serializer=name), "workflow")
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    crud.get_data(rid)["steps"].append("mutated")
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
