"""DjangoStorage on PostgreSQL writes optimistically: one statement on a resource the process
remembers, and nothing lost, doubled or wrongly refused when another process changed it first.

Each `_process()` is a CRUD with its own DjangoStorage, as each server process has: its own memory
of resource states, the same tables. The tests run outside a transaction (`transaction=True`),
where states are remembered, as in a request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import pytest
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from crudgen import (
    CreatorOnly,
    CRUDSystem,
    DjangoStorage,
    MetadataConfig,
    NotFoundError,
    RevisionConflict,
    RouteConfig,
    SingleModelCRUD,
    ValidationFailed,
)
from crudgen.models import StoredResource, StoredRevision
from tests.crudgen.conftest import Clock, StepsRenamed, Workflow, WorkflowV2

pytestmark = [
    pytest.mark.postgres(reason="optimistic writes need PostgreSQL's row versions"),
    pytest.mark.django_db(transaction=True),
]


def _system(clock: Clock, **storage: int) -> CRUDSystem:
    crud_system = CRUDSystem(
        storage_factory=lambda name: DjangoStorage(name, **storage),
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    )
    crud_system.register_model(Workflow)
    return crud_system


def _process(clock: Clock, **storage: int) -> SingleModelCRUD:
    return _system(clock, **storage).get_crud(Workflow)


@contextmanager
def _statements() -> Iterator[list[str]]:
    """What the connection sends: each statement, and BEGIN whenever Django opens a transaction."""
    sent: list[str] = []
    wrapper = connections["default"]
    original = wrapper.set_autocommit

    def set_autocommit(autocommit: bool, *args: object, **kwargs: object) -> None:
        if not autocommit:
            sent.append("BEGIN")
        original(autocommit, *args, **kwargs)

    with mock.patch.object(wrapper, "set_autocommit", set_autocommit), CaptureQueriesContext(wrapper) as captured:
        yield sent
    sent.extend(query["sql"] for query in captured.captured_queries)


WRITES: list[tuple[str, Callable[[SingleModelCRUD, str], object]]] = [
    ("patch", lambda crud, rid: crud.patch(rid, [{"op": "replace", "path": "/name", "value": "patched"}])),
    ("put", lambda crud, rid: crud.update(rid, {"name": "put", "steps": ["ls"]})),
    ("delete", lambda crud, rid: crud.delete(rid)),
    ("restore", lambda crud, rid: crud.restore(rid)),
    ("switch", lambda crud, rid: crud.switch(rid, f"{rid}:1")),
]


def test_each_write_on_a_resource_the_process_created_is_one_statement(clock: Clock) -> None:
    # Given a resource this process created
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    sent: dict[str, list[str]] = {}
    # When it is patched, replaced, deleted, restored and switched back
    for name, write in WRITES:
        with _statements() as statements:
            write(crud, rid)
        sent[name] = statements
    # Then each write sent one statement: no read, BEGIN, lock or COMMIT
    assert {name: len(statements) for name, statements in sent.items()} == {name: 1 for name, _ in WRITES}
    assert all(statements[0].lstrip().startswith("WITH") for statements in sent.values())
    assert crud.get_data(rid) == {"name": "w", "steps": [], "description": "", "every_seconds": None, "enabled": True}
    assert crud.list_revisions(rid).total == 3


def test_a_write_after_a_read_in_the_same_process_is_one_statement(clock: Clock) -> None:
    # Given a resource another process created, read here
    rid = _process(clock).create({"name": "w", "steps": []})["resource_id"]
    here = _process(clock)
    here.get_data(rid)
    # When it is patched here
    with _statements() as statements:
        here.patch(rid, [{"op": "add", "path": "/steps/-", "value": "a"}])
    # Then the patch is one statement
    assert len(statements) == 1


def test_a_write_on_a_resource_the_process_has_not_seen_reads_it_first(clock: Clock) -> None:
    # Given a resource another process created
    rid = _process(clock).create({"name": "w", "steps": []})["resource_id"]
    here = _process(clock)
    # When it is patched here
    with _statements() as statements:
        here.patch(rid, [{"op": "add", "path": "/steps/-", "value": "a"}])
    # Then the patch reads the row, then writes in one statement, without a transaction
    assert len(statements) == 2
    assert statements[0].lstrip().startswith("SELECT")


def test_a_write_decided_on_a_state_another_process_changed_loses_nothing(clock: Clock) -> None:
    # Given a resource one process created (and remembers), then changed by another process
    first, second = _process(clock), _process(clock)
    rid = first.create({"name": "w", "steps": []})["resource_id"]
    second.patch(rid, [{"op": "add", "path": "/steps/-", "value": "second"}])
    # When the first process patches it
    first.patch(rid, [{"op": "add", "path": "/steps/-", "value": "first"}])
    # Then the patch applies on top of the other one, as the third revision
    assert first.get_data(rid)["steps"] == ["second", "first"]
    newest = first.list_revisions(rid).items[0]
    assert (newest["revision_id"], newest["parent_revision_id"]) == (f"{rid}:3", f"{rid}:2")


def test_if_match_is_checked_against_the_stored_revision_not_a_remembered_one(clock: Clock) -> None:
    # Given a resource one process remembers at revision 1 while another moved it to revision 2
    first, second = _process(clock), _process(clock)
    rid = first.create({"name": "w", "steps": []})["resource_id"]
    second.update(rid, {"name": "v2", "steps": []})
    # When the first process is asked to patch revision 2, then revision 1
    accepted = first.patch(rid, [{"op": "replace", "path": "/name", "value": "v3"}], if_match=f'"{rid}:2"')
    with pytest.raises(RevisionConflict):
        first.patch(rid, [{"op": "replace", "path": "/name", "value": "lost"}], if_match=f'"{rid}:1"')
    # Then revision 2 is built on and the stale If-Match stores nothing
    assert accepted["current_revision_id"] == f"{rid}:3"
    assert first.get_data(rid)["name"] == "v3"
    assert first.list_revisions(rid).total == 3


def test_identical_data_is_compared_with_the_stored_revision_not_a_remembered_one(clock: Clock) -> None:
    # Given a resource one process remembers with data X while another replaced it with Y
    first, second = _process(clock), _process(clock)
    rid = first.create({"name": "x", "steps": []})["resource_id"]
    second.update(rid, {"name": "y", "steps": []})
    # When the first process replaces it with X again
    meta = first.update(rid, {"name": "x", "steps": []})
    # Then that is a change, stored as a new revision
    assert meta["current_revision_id"] == f"{rid}:3"
    assert second.get_data(rid)["name"] == "x"


def test_a_delete_another_process_already_made_is_not_counted_twice(clock: Clock) -> None:
    # Given a resource one process remembers as live while another deleted it
    first, second = _process(clock), _process(clock)
    rid = first.create({"name": "w", "steps": []})["resource_id"]
    first.create({"name": "other", "steps": []})
    second.delete(rid)
    # When the first process deletes it too
    meta = first.delete(rid)
    # Then nothing changes: one deleted, one live, in the rows and in the tally
    assert meta["is_deleted"] is True
    rows = StoredResource.objects.filter(namespace="workflow")
    assert (first.count(is_deleted=False), first.count(is_deleted=True)) == (1, 1)
    assert (rows.filter(is_deleted=False).count(), rows.filter(is_deleted=True).count()) == (1, 1)


def test_a_switch_to_a_revision_that_does_not_exist_is_404_and_stores_nothing(clock: Clock) -> None:
    # Given a resource this process created and patched
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    crud.patch(rid, [{"op": "replace", "path": "/name", "value": "v2"}])
    # When it is switched to a revision it does not have
    with pytest.raises(NotFoundError, match="revision nope"):
        crud.switch(rid, "nope")
    # Then it stays at revision 2
    assert crud.get_meta(rid)["current_revision_id"] == f"{rid}:2"
    assert crud.get_data(rid)["name"] == "v2"


def test_a_switch_stores_the_data_of_the_revision_it_names(clock: Clock) -> None:
    # Given a resource another process created and changed twice, remembered here after a read
    rid = _process(clock).create({"name": "v1", "steps": ["a"]})["resource_id"]
    here = _process(clock)
    here.update(rid, {"name": "v2", "steps": []})
    here.update(rid, {"name": "v3", "steps": []})
    # When it is switched back to revision 1, then patched
    here.switch(rid, f"{rid}:1")
    here.patch(rid, [{"op": "add", "path": "/steps/-", "value": "b"}])
    # Then revision 1's data came back and the patch built on it
    assert _process(clock).get_data(rid)["steps"] == ["a", "b"]
    assert _process(clock).get_data(rid)["name"] == "v1"


def test_a_write_rolled_back_with_its_transaction_leaves_nothing_remembered(clock: Clock) -> None:
    # Given a resource this process created
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    # When a patch inside a transaction is rolled back, and a patch follows outside
    with transaction.atomic():
        crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "rolled back"}])
        transaction.set_rollback(True)
    crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "kept"}])
    # Then the second patch built on the stored state
    assert crud.get_data(rid)["steps"] == ["kept"]
    assert list(StoredRevision.objects.order_by("number").values_list("revision_id", flat=True)) == [
        f"{rid}:1",
        f"{rid}:2",
    ]


def test_a_write_committed_in_a_transaction_is_built_on_afterwards(clock: Clock) -> None:
    # Given a resource this process created and then patched inside a transaction that commits
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    with transaction.atomic():
        crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "in a transaction"}])
    # When it is patched again outside
    crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": "after"}])
    # Then the patch built on the committed one
    assert crud.get_data(rid)["steps"] == ["in a transaction", "after"]


def test_an_invalid_patch_on_a_remembered_resource_is_refused_on_the_stored_state(clock: Clock) -> None:
    # Given a resource this process created
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    # When a patch adds a field the model does not have
    with _statements() as statements, pytest.raises(ValidationFailed):
        crud.patch(rid, [{"op": "add", "path": "/colour", "value": "red"}])
    # Then the refusal was confirmed on a read of the row, and nothing was written
    assert len(statements) == 1
    assert statements[0].lstrip().startswith("SELECT")
    assert crud.list_revisions(rid).total == 1


def test_a_value_postgresql_cannot_store_is_refused_before_it_reaches_the_database(clock: Clock) -> None:
    # Given a resource this process created
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    # When a patch would store a NUL character, which jsonb refuses: crudgen refuses it first, on
    # every storage alike, naming the field
    with pytest.raises(ValidationFailed) as refused:
        crud.patch(rid, [{"op": "replace", "path": "/name", "value": "a\x00b"}])
    assert refused.value.fields == {"name": "must not contain a NUL character"}
    # Then nothing was stored
    assert crud.get_data(rid)["name"] == "w"
    assert crud.list_revisions(rid).total == 1


def test_changing_data_after_reading_it_does_not_change_what_a_write_builds_on(clock: Clock) -> None:
    # Given a resource this process read, and the caller changing the data it got
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": ["a"]})["resource_id"]
    crud.get_data(rid)["steps"].append("changed in memory")
    # When it is patched
    crud.patch(rid, [{"op": "replace", "path": "/name", "value": "v2"}])
    # Then the patch built on the stored data
    assert crud.get_data(rid)["steps"] == ["a"]


def test_a_remembered_version_must_match_the_row_as_well_as_its_transaction_id(clock: Clock) -> None:
    # Given a deleted resource this process remembers as live under the transaction id its row has
    # today, as if that id had been reused after a wraparound
    crud = _process(clock)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    crud.delete(rid)
    today = crud.storage._remembered.get(rid)
    crud.storage._remembered.put(replace(today, meta=today.meta.evolve(is_deleted=False)))
    # When it is deleted again
    clock.advance(seconds=1)
    crud.delete(rid)
    # Then the delete was decided again on the stored row: a no-op, counted once
    assert (crud.count(is_deleted=False), crud.count(is_deleted=True)) == (0, 1)
    assert crud.get_meta(rid)["updated_time"] == today.meta.updated_time.isoformat()


def _old_and_new_schema() -> tuple[SingleModelCRUD, SingleModelCRUD, DjangoStorage]:
    """The same resources under the first schema and under the second, in one process."""
    storage = DjangoStorage("workflow")
    old = CRUDSystem(use_plural=False).register_model(Workflow, storage=storage)
    new = CRUDSystem(use_plural=False).register_model(
        WorkflowV2, resource_name="workflow", storage=storage, migration=StepsRenamed()
    )
    return old, new, storage


def test_a_write_on_a_remembered_old_schema_state_stores_it_migrated() -> None:
    # Given a resource created under the first schema by this process
    old, new, storage = _old_and_new_schema()
    rid = old.create({"name": "w", "steps": ["a"]})["resource_id"]
    # When it is patched under the second schema
    with _statements() as statements:
        new.patch(rid, [{"op": "add", "path": "/commands/-", "value": "b"}])
    # Then the one statement stored the migrated data under the new schema version
    assert len(statements) == 1
    stored = storage.fetch(rid)
    assert (stored.meta.schema_version, stored.data["commands"]) == ("2", ["a", "b"])


def test_a_switch_to_an_old_schema_revision_stores_it_migrated() -> None:
    # Given a resource with two revisions stored under the first schema
    old, new, storage = _old_and_new_schema()
    rid = old.create({"name": "w", "steps": ["first"]})["resource_id"]
    old.update(rid, {"name": "w", "steps": ["second"]})
    # When it is switched back to revision 1 under the second schema
    new.switch(rid, f"{rid}:1")
    # Then revision 1's data is stored in the new shape
    stored = storage.fetch(rid)
    assert (stored.meta.schema_version, stored.data["commands"]) == ("2", ["first"])
    assert "steps" not in stored.data


def test_a_process_remembers_a_bounded_number_of_states(clock: Clock) -> None:
    # Given a process that remembers two states and created three resources
    crud = _process(clock, remembered_states=2)
    oldest, *newer = [crud.create({"name": f"w{n}", "steps": []})["resource_id"] for n in range(3)]
    # When the oldest and then a newer one are patched
    with _statements() as on_oldest:
        crud.patch(oldest, [{"op": "replace", "path": "/name", "value": "x"}])
    with _statements() as on_newer:
        crud.patch(newer[-1], [{"op": "replace", "path": "/name", "value": "x"}])
    # Then the oldest was forgotten (read first) and the newer one was not
    assert (len(on_oldest), len(on_newer)) == (2, 1)


def test_a_stranger_cannot_write_a_remembered_resource_over_http(clock: Clock, mount: Callable[..., None]) -> None:
    # Given workflows private to their creator, one created by bob through this process
    crud_system = CRUDSystem(
        storage_factory=DjangoStorage,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
        access_policy=CreatorOnly(),
    )
    crud_system.register_model(Workflow)
    mount(crud_system.create_router("/api", RouteConfig()))
    api = APIClient()
    created = api.post("/api/workflow", {"name": "bob's", "steps": []}, format="json", HTTP_X_USER_ID="bob")
    rid = created.json()["resource_id"]
    # When carol patches, replaces, deletes and switches it
    body = '[{"op": "replace", "path": "/name", "value": "carol was here"}]'
    answers = [
        api.patch(f"/api/workflow/{rid}", body, content_type="application/json-patch+json", HTTP_X_USER_ID="carol"),
        api.put(f"/api/workflow/{rid}", {"name": "carol", "steps": []}, format="json", HTTP_X_USER_ID="carol"),
        api.delete(f"/api/workflow/{rid}", HTTP_X_USER_ID="carol"),
        api.post(f"/api/workflow/{rid}/switch/{rid}:1", HTTP_X_USER_ID="carol"),
    ]
    # Then each answer is 404 and bob's workflow is as he left it
    assert [answer.status_code for answer in answers] == [404, 404, 404, 404]
    assert api.get(f"/api/workflow/{rid}/data", HTTP_X_USER_ID="bob").json()["name"] == "bob's"
    assert api.get(f"/api/workflow/{rid}/revision-list", HTTP_X_USER_ID="bob").json()["total"] == 1


def test_racing_deletes_and_restores_keep_the_tally_equal_to_the_rows(clock: Clock) -> None:
    # Given one resource every writer remembers, in processes of their own
    writers = 8
    processes = [_process(clock) for _ in range(writers)]
    rid = processes[0].create({"name": "race", "steps": []})["resource_id"]
    for crud in processes[1:]:
        crud.get_meta(rid)
    barrier = threading.Barrier(writers)

    def flip(index: int) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                (processes[index].delete if index % 2 else processes[index].restore)(rid)
        finally:
            connections.close_all()

    # When they delete and restore it at the same time
    threads = [threading.Thread(target=flip, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then the tally agrees with the one row, whichever write came last
    deleted = StoredResource.objects.get(resource_id=rid).is_deleted
    crud = processes[0]
    assert (crud.count(is_deleted=False), crud.count(is_deleted=True)) == ((0, 1) if deleted else (1, 0))
