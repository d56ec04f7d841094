"""DjangoStorage's namespace tally: list totals and counts without counting rows, always exact."""

from __future__ import annotations

import io
import threading

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from crudgen import CRUDSystem, DjangoStorage, DuplicateResource, ListQueryParams, MetadataConfig
from crudgen.models import NamespaceTally, StoredResource
from tests.crudgen.conftest import Clock, Workflow

pytestmark = pytest.mark.django_db


def _crud(clock: Clock):
    system = CRUDSystem(
        storage_factory=DjangoStorage,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    )
    return system, system.register_model(Workflow)


def _row_counts(namespace: str) -> tuple[int, int]:
    rows = StoredResource.objects.filter(namespace=namespace)
    return rows.filter(is_deleted=False).count(), rows.filter(is_deleted=True).count()


def test_counts_follow_create_delete_restore_and_load(clock: Clock) -> None:
    # Given four workflows, two deleted, one restored, one replaced, then a dump
    system, crud = _crud(clock)
    ids = [crud.create({"name": f"w{n}", "steps": []})["resource_id"] for n in range(4)]
    crud.delete(ids[0])
    crud.delete(ids[1])
    crud.restore(ids[1])
    crud.update(ids[2], {"name": "renamed", "steps": ["ls"]})
    dumped = io.StringIO()
    system.dump(dumped)
    crud.restore(ids[0])
    # When the dump is loaded over them
    system.load(io.StringIO(dumped.getvalue()), on_duplicate="overwrite")

    live, deleted = _row_counts(crud.storage.namespace)
    # Then the tally's counts equal the rows' counts, for lists too
    assert (live, deleted) == (3, 1)
    assert crud.count(is_deleted=False) == live
    assert crud.count(is_deleted=True) == deleted
    assert crud.count(is_deleted=None) == live + deleted
    assert crud.list_with_params(ListQueryParams()).total == live


def test_an_unfiltered_list_total_reads_the_tally_not_the_rows(clock: Clock) -> None:
    # Given three workflows
    _, crud = _crud(clock)
    for n in range(3):
        crud.create({"name": f"w{n}", "steps": []})

    # When a page of two is listed
    with CaptureQueriesContext(connection) as queries:
        result = crud.list_with_params(ListQueryParams(page_size=2))

    # Then the total is three and no COUNT ran over the resource rows
    assert result.total == 3
    assert not [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "crudgen_storedresource" in q["sql"]]


def test_a_filtered_list_total_counts_only_the_matching_rows(clock: Clock) -> None:
    # Given a workflow of alice and one of bob
    _, crud = _crud(clock)
    crud.create({"name": "a", "steps": []}, user="alice")
    crud.create({"name": "b", "steps": []}, user="bob")

    # When the list filters on bob
    result = crud.list_with_params(ListQueryParams(created_by_filter=["bob"]))

    # Then the total counts only his
    assert result.total == 1


def test_recount_rebuilds_the_tally_after_rows_were_written_around_the_storage(clock: Clock) -> None:
    # Given one workflow and a tally someone corrupted
    _, crud = _crud(clock)
    crud.create({"name": "a", "steps": []})
    NamespaceTally.objects.filter(namespace=crud.storage.namespace).update(live=99)

    # When the tally is recounted
    crud.storage.recount()

    # Then the count is right again
    assert crud.count() == 1


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so the writers never meet")
@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_and_deletes_keep_the_tally_exact(clock: Clock) -> None:
    # Given six writers on PostgreSQL, each creating five workflows and deleting every second one
    _, crud = _crud(clock)
    writers, per_writer = 6, 5
    barrier = threading.Barrier(writers)

    def write() -> None:
        try:
            barrier.wait()
            for n in range(per_writer):
                created = crud.create({"name": f"w{n}", "steps": []})
                if n % 2:
                    crud.delete(created["resource_id"])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    # When they run at the same moment
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    live, deleted = _row_counts(crud.storage.namespace)
    # Then the tally equals the rows: 18 live, 12 deleted
    assert (crud.count(is_deleted=False), crud.count(is_deleted=True)) == (live, deleted) == (18, 12)


@pytest.mark.postgres(reason="the one-statement create is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_create_on_postgres_is_one_statement_that_writes_resource_revision_and_tally(clock: Clock) -> None:
    # Given Django storage on PostgreSQL
    _, crud = _crud(clock)

    # When a workflow is created
    with CaptureQueriesContext(connection) as queries:
        created = crud.create({"name": "one trip", "steps": ["ls"]})

    # Then one statement wrote the resource, its revision and the tally
    assert len(queries) == 1
    assert crud.read(created["resource_id"]).data["name"] == "one trip"
    assert crud.list_revisions(created["resource_id"]).total == 1
    assert crud.count() == 1


@pytest.mark.postgres(reason="the one-statement create is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_duplicate_create_on_postgres_writes_nothing(clock: Clock) -> None:
    # Given a stored workflow and its first revision
    _, crud = _crud(clock)
    created = crud.storage.fetch(crud.create({"name": "a", "steps": []})["resource_id"])
    revision = crud.storage.revisions(created.meta.resource_id, 0, 1)[0][0]

    # When the same resource is inserted again
    # Then it is refused and nothing more is stored
    with pytest.raises(DuplicateResource):
        crud.storage.insert(created.meta, revision, created.data)

    assert crud.count() == 1
    assert StoredResource.objects.count() == 1
