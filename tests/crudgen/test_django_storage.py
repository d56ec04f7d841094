"""DjangoStorage: SQL lists with flat query counts, transactions, and no lost update under concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from crudgen import CRUDSystem, DjangoStorage, ListQueryParams, ListScope, MetadataConfig
from crudgen.models import StoredResource, StoredRevision
from tests.crudgen.conftest import Clock, Workflow, plan_of_first_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def django_system(clock: Clock) -> CRUDSystem:
    crud_system = CRUDSystem(
        storage_factory=DjangoStorage,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    )
    crud_system.register_model(Workflow)
    return crud_system


@pytest.fixture
def django_api(django_system: CRUDSystem, mount: Callable[..., None]) -> APIClient:
    mount(django_system.create_router("/api"))
    return APIClient()


def test_list_page_costs_two_queries_whatever_the_collection_size(
    django_system: CRUDSystem, django_api: APIClient, django_assert_max_num_queries
) -> None:
    # Given 60 workflows on Django storage
    crud = django_system.get_crud(Workflow)
    for index in range(60):
        crud.create({"name": f"w{index}", "steps": []}, user="alice")
    # When the second page of 20 is read
    with django_assert_max_num_queries(2):
        response = django_api.get("/api/workflow/full?page=2&page_size=20")
    # Then it costs at most two queries and holds 20 items
    assert len(response.json()["items"]) == 20


def test_read_after_many_revisions_is_one_query(
    django_system: CRUDSystem, django_api: APIClient, django_assert_max_num_queries
) -> None:
    # Given a workflow patched 30 times
    crud = django_system.get_crud(Workflow)
    rid = crud.create({"name": "w", "steps": []}, user="alice")["resource_id"]
    for index in range(30):
        crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": str(index)}])
    # When its data is read
    with django_assert_max_num_queries(1):
        response = django_api.get(f"/api/workflow/{rid}/data")
    # Then it costs one query and holds every step
    assert len(response.json()["steps"]) == 30


def test_patch_reads_and_writes_in_a_bounded_number_of_queries(
    django_system: CRUDSystem, django_api: APIClient, django_assert_max_num_queries
) -> None:
    # Given a workflow on Django storage
    rid = django_system.get_crud(Workflow).create({"name": "w", "steps": []}, user="alice")["resource_id"]
    # When it is patched over HTTP
    with django_assert_max_num_queries(5):
        response = django_api.patch(
            f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "x"}], format="json"
        )
    # Then the patch is stored within five queries
    assert response.status_code == 200


def test_count_runs_in_sql(django_system: CRUDSystem, django_assert_max_num_queries) -> None:
    # Given five workflows
    crud = django_system.get_crud(Workflow)
    for index in range(5):
        crud.create({"name": f"w{index}", "steps": []})
    # When they are counted
    # Then one query answers five
    with django_assert_max_num_queries(1):
        assert crud.count() == 5


def test_create_writes_one_resource_row_and_one_revision_row(django_system: CRUDSystem) -> None:
    # Given Django storage
    # When alice creates a workflow
    django_system.get_crud(Workflow).create({"name": "w", "steps": ["a"]}, user="alice")
    # Then one resource row and one revision row hold its full data
    assert StoredResource.objects.filter(namespace="workflow").count() == 1
    assert StoredRevision.objects.get().data == {
        "name": "w",
        "steps": ["a"],
        "description": "",
        "every_seconds": None,
        "enabled": True,
    }


def test_a_failed_write_rolls_back_the_whole_transaction(django_system: CRUDSystem) -> None:
    # Given a stored workflow and its update time
    crud = django_system.get_crud(Workflow)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    original = StoredResource.objects.get().updated_time
    # When a patch fails validation inside the write transaction
    # Then no revision is added and the row is untouched
    with pytest.raises(Exception, match="unknown field"):
        crud.patch(rid, [{"op": "add", "path": "/bogus", "value": 1}])
    assert StoredRevision.objects.count() == 1
    assert StoredResource.objects.get().updated_time == original


def test_every_list_filter_and_sort_has_an_index_ending_in_the_tie_break() -> None:
    # Given the resource table's indexes
    # When their columns are read
    indexed = {tuple(index.fields) for index in StoredResource._meta.indexes}
    for column in ("created_time", "updated_time", "created_by", "updated_by"):
        assert ("namespace", "is_deleted", column, "resource_id") in indexed
    # Then each filter and sort column has an index led by namespace and deleted flag and ending in resource_id
    assert ("namespace", "is_deleted", "resource_id") in indexed


@pytest.mark.django_db
def test_a_list_page_is_an_index_walk_without_sorting_the_namespace() -> None:
    # Given an empty namespace on Django storage
    storage = DjangoStorage(namespace="plan")
    # When the first page is planned
    plan = plan_of_first_page(storage)

    # Then the plan walks an index and sorts nothing
    assert "TEMP B-TREE" not in plan.upper()
    assert "Sort " not in plan


@pytest.mark.django_db
def test_a_list_scoped_to_one_creator_is_an_index_walk_of_that_creator() -> None:
    # Given a storage whose access policy lets the caller list only what bob created
    storage = DjangoStorage(namespace="plan")
    # When the first page is planned
    plan = plan_of_first_page(storage, scope=ListScope.created_by_one_of(["bob"]))
    # Then it walks the scope index rather than sorting bob's rows or scanning the namespace
    assert "TEMP B-TREE" not in plan.upper()
    assert "Sort " not in plan
    if connection.vendor == "sqlite":
        assert "crudgen_res_scope_created" in plan


@pytest.mark.postgres(reason="its row locks are what the racing writers meet; SQLite runs one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_racing_patches_on_postgres_never_lose_an_update() -> None:
    # Given a workflow and eight writers released together on PostgreSQL
    crud_system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False)
    crud = crud_system.register_model(Workflow)
    rid = crud.create({"name": "race", "steps": []})["resource_id"]
    writers = 8
    barrier = threading.Barrier(writers)
    outcomes: list[str] = []

    def append(index: int) -> None:
        try:
            barrier.wait()
            crud.patch(rid, [{"op": "add", "path": "/steps/-", "value": f"s{index}"}])
            outcomes.append("ok")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=append, args=(index,)) for index in range(writers)]
    # When each appends a step at the same moment
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    steps = crud.get_data(rid)["steps"]
    # Then every step is there, each in its own revision
    assert outcomes == ["ok"] * writers
    assert sorted(steps) == sorted(f"s{index}" for index in range(writers))
    assert crud.list_revisions(rid).total == writers + 1


@pytest.mark.postgres(reason="its row locks are what the racing writers meet; SQLite runs one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_racing_patches_with_the_same_if_match_on_postgres_let_exactly_one_win() -> None:
    # Given a workflow and two writers naming the same revision in If-Match
    crud = CRUDSystem(storage_factory=DjangoStorage, use_plural=False).register_model(Workflow)
    meta = crud.create({"name": "race", "steps": []})
    barrier = threading.Barrier(2)
    results: list[str] = []

    def write(value: str) -> None:
        try:
            barrier.wait()
            crud.patch(
                meta["resource_id"],
                [{"op": "replace", "path": "/name", "value": value}],
                if_match=f'"{meta["current_revision_id"]}"',
            )
            results.append("ok")
        except Exception as exc:
            results.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(value,)) for value in ("a", "b")]
    # When they patch at the same moment
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one wins and the other gets a revision conflict
    assert sorted(results) == ["RevisionConflict", "ok"]


@pytest.mark.parametrize("microsecond", [0, 123456])
def test_times_a_write_stores_are_the_times_the_orm_reads_and_lists_filter_on(clock: Clock, microsecond: int) -> None:
    # Given a resource patched at a moment with or without microseconds
    crud = CRUDSystem(
        storage_factory=DjangoStorage,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
    ).register_model(Workflow)
    rid = crud.create({"name": "w", "steps": []})["resource_id"]
    moment = clock.advance(hours=1).replace(microsecond=microsecond)
    clock.current = moment
    # When it is patched
    crud.patch(rid, [{"op": "replace", "path": "/name", "value": "x"}])
    # Then the ORM, the storage and a list filtered on that moment all see the same time
    assert StoredResource.objects.get().updated_time == moment
    assert StoredRevision.objects.get(number=2).created_time == moment
    assert crud.storage.fetch(rid).meta.updated_time == moment
    assert crud.list_with_params(ListQueryParams(updated_time_range=(moment, moment))).total == 1
