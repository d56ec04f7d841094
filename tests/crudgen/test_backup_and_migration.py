"""Dump/load across backends, duplicate policies, management commands, and schema migration."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from crudgen import CRUDSystem, DiskStorage, DjangoStorage, DuplicateResource, MemoryStorage, MetadataConfig
from crudgen.metadata import Revision
from crudgen.storage.base import Storage, Stored
from tests.crudgen.conftest import Clock, StepsRenamed, Workflow, WorkflowV2

pytestmark = pytest.mark.django_db


def _system(factory: Any, clock: Clock) -> CRUDSystem:
    crud_system = CRUDSystem(
        storage_factory=factory,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    )
    crud_system.register_model(Workflow)
    return crud_system


def _populate(crud_system: CRUDSystem, clock: Clock) -> str:
    crud = crud_system.get_crud(Workflow)
    rid = crud.create({"name": "w", "steps": ["a"]}, user="alice")["resource_id"]
    clock.advance(seconds=1.5)
    crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "b"}], user="bob")
    crud.delete(rid, user="carol")
    crud.create({"name": "second", "steps": []}, user="dave")
    return rid


def _snapshot(crud_system: CRUDSystem) -> list:
    crud = crud_system.get_crud(Workflow)
    return [(stored.meta, stored.data, revisions) for stored, revisions in crud.storage.export()]


def test_round_trip_from_memory_into_django_storage_is_lossless(clock: Clock) -> None:
    # Given two workflows in memory storage, one patched and deleted
    source = _system(MemoryStorage, clock)
    _populate(source, clock)
    stream = io.StringIO()
    # Then every resource and revision is the same there
    assert source.dump(stream) == 2
    # When they are dumped and loaded into Django storage
    target = _system(DjangoStorage, clock)
    report = target.load(io.StringIO(stream.getvalue()))
    assert report.loaded == 2
    assert _snapshot(target) == _snapshot(source)


def test_round_trip_from_django_into_disk_storage_through_a_binary_stream(clock: Clock, tmp_path: Path) -> None:
    # Given two workflows in Django storage
    source = _system(DjangoStorage, clock)
    _populate(source, clock)
    stream = io.BytesIO()
    source.dump(stream)
    # When they are dumped to bytes and loaded into msgpack disk storage
    target = _system(lambda name: DiskStorage(tmp_path / name, serializer="msgpack"), clock)
    target.load(io.BytesIO(stream.getvalue()))
    # Then every resource and revision is the same there
    assert _snapshot(target) == _snapshot(source)


def test_load_overwrite_replaces_an_existing_resource(clock: Clock) -> None:
    # Given a dump taken while a workflow was deleted, then the workflow restored
    source = _system(MemoryStorage, clock)
    rid = _populate(source, clock)
    dumped = io.StringIO()
    source.dump(dumped)
    source.get_crud(Workflow).restore(rid)
    # When the dump is loaded with overwrite
    report = source.load(io.StringIO(dumped.getvalue()), on_duplicate="overwrite")
    # Then both resources are overwritten and the workflow is deleted again
    assert report.overwritten == 2
    assert source.get_crud(Workflow).read(rid).meta.is_deleted is True


def test_load_skip_keeps_existing_resources(clock: Clock) -> None:
    # Given a dump taken while a workflow was deleted, then the workflow restored
    source = _system(MemoryStorage, clock)
    rid = _populate(source, clock)
    dumped = io.StringIO()
    source.dump(dumped)
    source.get_crud(Workflow).restore(rid)
    # When the dump is loaded with skip
    report = source.load(io.StringIO(dumped.getvalue()), on_duplicate="skip")
    # Then both are skipped and the workflow stays restored
    assert report.skipped == 2
    assert source.get_crud(Workflow).read(rid).meta.is_deleted is False


def test_load_error_refuses_a_duplicate(clock: Clock) -> None:
    # Given a dump of resources that still exist
    source = _system(MemoryStorage, clock)
    _populate(source, clock)
    dumped = io.StringIO()
    source.dump(dumped)
    # When it is loaded with error
    # Then DuplicateResource is raised
    with pytest.raises(DuplicateResource):
        source.load(io.StringIO(dumped.getvalue()), on_duplicate="error")


@pytest.mark.parametrize("storage_factory", [MemoryStorage, DjangoStorage], ids=["memory", "django"])
def test_load_refused_by_a_duplicate_late_in_the_dump_loads_nothing(clock: Clock, storage_factory) -> None:
    # Given a target holding only the dump's last resource
    source = _system(MemoryStorage, clock)
    _populate(source, clock)
    dumped = io.StringIO()
    source.dump(dumped)
    last_id = json.loads(dumped.getvalue().splitlines()[-1])["meta"]["resource_id"]
    target = _system(storage_factory, clock)
    only_last = io.StringIO()
    lines = dumped.getvalue().splitlines()
    only_last.write(lines[0] + "\n" + lines[-1] + "\n")
    target.load(io.StringIO(only_last.getvalue()))

    # When the whole dump is loaded with error
    # Then the duplicate is named and nothing before it was loaded
    with pytest.raises(DuplicateResource, match=last_id):
        target.load(io.StringIO(dumped.getvalue()), on_duplicate="error")

    assert target.get_crud(Workflow).count(is_deleted=None) == 1


def test_load_refuses_a_stream_without_the_dump_header(clock: Clock) -> None:
    # Given a stream that is not a crudgen dump
    # When it is loaded
    # Then ValueError says so
    with pytest.raises(ValueError, match="not a crudgen dump"):
        _system(MemoryStorage, clock).load(io.StringIO('{"x": 1}\n'))


command_system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False)
command_system.register_model(Workflow)


def test_dump_and_load_commands_round_trip_through_a_file(tmp_path: Path) -> None:
    # Given a workflow dumped to a file by crudgen_dump, then deleted
    crud = command_system.get_crud(Workflow)
    rid = crud.create({"name": "cmd", "steps": []}, user="alice")["resource_id"]
    target = tmp_path / "dump.jsonl"
    call_command("crudgen_dump", "--system", f"{__name__}.command_system", "--output", str(target))
    crud.delete(rid)
    out = io.StringIO()
    # When crudgen_load reads the file
    call_command("crudgen_load", str(target), "--system", f"{__name__}.command_system", stdout=out)
    # Then it reports one load and the workflow is live again
    assert "loaded 1" in out.getvalue()
    assert crud.read(rid).meta.is_deleted is False


def test_load_command_with_error_policy_fails_cleanly(tmp_path: Path) -> None:
    # Given a dump file of workflows that still exist
    command_system.get_crud(Workflow).create({"name": "cmd", "steps": []})
    target = tmp_path / "dump.jsonl"
    call_command("crudgen_dump", "--system", f"{__name__}.command_system", "--output", str(target))
    # When crudgen_load runs with --on-duplicate error
    # Then it fails with a CommandError naming the duplicate
    with pytest.raises(CommandError, match="already exists"):
        call_command("crudgen_load", str(target), "--system", f"{__name__}.command_system", "--on-duplicate", "error")


@override_settings(CRUDGEN_SYSTEMS=[])
def test_commands_need_a_system() -> None:
    # Given no --system and an empty CRUDGEN_SYSTEMS
    # When crudgen_migrate runs
    # Then it fails saying what to set
    with pytest.raises(CommandError, match="CRUDGEN_SYSTEMS"):
        call_command("crudgen_migrate")


def _migrated_system(storage: Any) -> CRUDSystem:
    crud_system = CRUDSystem(use_plural=False)
    crud_system.register_model(WorkflowV2, resource_name="workflow", storage=storage, migration=StepsRenamed())
    return crud_system


def test_old_revisions_are_read_in_the_new_shape(clock: Clock) -> None:
    # Given a workflow stored with steps, and the model now calling them commands
    storage = MemoryStorage()
    old = CRUDSystem(use_plural=False)
    old.register_model(Workflow, storage=storage)
    rid = old.get_crud(Workflow).create({"name": "w", "steps": ["a"]})["resource_id"]
    # When it is read through the migrated model
    crud = _migrated_system(storage).get_crud(WorkflowV2)
    # Then it reads commands while the stored row still says steps
    assert crud.get_data(rid)["commands"] == ["a"]
    assert storage.fetch(rid).data["steps"] == ["a"]


def test_a_write_on_migrated_data_stores_the_new_schema_version() -> None:
    # Given a workflow stored under the old schema
    storage = MemoryStorage()
    old = CRUDSystem(use_plural=False)
    old.register_model(Workflow, storage=storage)
    rid = old.get_crud(Workflow).create({"name": "w", "steps": ["a"]})["resource_id"]
    crud = _migrated_system(storage).get_crud(WorkflowV2)
    # When it is patched through the migrated model
    crud.patch(rid, [{"op": "add", "path": "/commands/-", "value": "b"}])
    # Then the stored row is in the new shape and version
    assert storage.fetch(rid).meta.schema_version == "2"
    assert storage.fetch(rid).data["commands"] == ["a", "b"]


migrate_storage_system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False)
migrate_storage_system.register_model(Workflow)
migrated_command_system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False)
migrated_command_system.register_model(WorkflowV2, resource_name="workflow", migration=StepsRenamed())


def test_migrate_command_rewrites_every_stored_revision() -> None:
    # Given a workflow with two revisions under the old schema
    rid = migrate_storage_system.get_crud(Workflow).create({"name": "w", "steps": ["a"]})["resource_id"]
    migrate_storage_system.get_crud(Workflow).patch(rid, [{"op": "add", "path": "/steps/-", "value": "b"}])
    out = io.StringIO()
    # When crudgen_migrate runs with the new model
    call_command("crudgen_migrate", "--system", f"{__name__}.migrated_command_system", stdout=out)
    storage = migrated_command_system.get_crud(WorkflowV2).storage
    (stored, revisions), *_ = list(storage.export())
    # Then every revision is rewritten to the new shape and version
    assert "workflow: 1 resources migrated" in out.getvalue()
    assert stored.data["commands"] == ["a", "b"]
    assert [revision.data["commands"] for revision in revisions] == [["a"], ["a", "b"]]
    assert {revision.schema_version for revision in revisions} == {"2"}


def test_a_write_made_while_the_migration_runs_is_kept_and_migrated(
    storage_factory: Callable[[str], Storage], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workflow stored under the old schema, on each backend
    storage = storage_factory("workflow")
    old = CRUDSystem(use_plural=False)
    old.register_model(Workflow, resource_name="workflow", storage=storage)
    rid = old.get_crud(Workflow).create({"name": "w", "steps": ["a"]})["resource_id"]
    crud = _migrated_system(storage).get_crud(WorkflowV2)
    read_everything = storage.export

    def export_then_a_client_patches() -> Iterator[tuple[Stored, list[Revision]]]:
        snapshot = list(read_everything())
        old.get_crud(Workflow).patch(rid, [{"op": "add", "path": "/steps/-", "value": "b"}])
        return iter(snapshot)

    monkeypatch.setattr(storage, "export", export_then_a_client_patches)
    # When the migration rewrites it after a client's patch landed behind its read
    migrated = crud.migrate_stored()
    # Then the patch and its revision are kept, in the new shape, and every revision is migrated
    stored = storage.fetch(rid)
    newest_first, _ = storage.revisions(rid, 0, 10)
    assert migrated == 1
    assert stored.data["commands"] == ["a", "b"]
    assert stored.meta.revision_count == 2
    assert [revision.data["commands"] for revision in newest_first] == [["a", "b"], ["a"]]
    assert {revision.schema_version for revision in newest_first} == {"2"}
