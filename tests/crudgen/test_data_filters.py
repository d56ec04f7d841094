"""Data-field filters: a FilterSet per registered model, the same answers on every storage, SQL and
indexes on DjangoStorage (docs/ARCHITECTURE.md §7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from crudgen import CreatorOnly, CRUDSystem, DataFilter, DjangoStorage, ListQueryParams, MetadataConfig, RouteConfig
from crudgen.apps import create_data_indexes
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock, plan_of_first_page
from tests.crudgen.example_app import Colour

pytestmark = pytest.mark.django_db


@dataclass
class Todo:
    title: str
    done: bool
    priority: int
    tags: list[str] = field(default_factory=list)
    note: str | None = None
    colour: Colour = Colour.RED
    size: Literal[1, 2, 3] = 1
    score: float = 0.0
    page: int = 0


TODOS = [
    {"title": "milk", "done": False, "priority": 2, "note": "2 litres", "score": 1.5},
    {"title": "Milk powder", "done": True, "priority": 5, "colour": "blue", "size": 3},
    {"title": "apple", "done": False, "priority": 10, "score": -2.0},
    {"title": "Zebra crossing", "done": True, "priority": 7, "note": None, "size": 2},
]


def _system(storage_factory: Callable[[str], Storage], clock: Clock, **kwargs) -> CRUDSystem:
    system = CRUDSystem(
        storage_factory=storage_factory,
        metadata_config=MetadataConfig.with_full_tracking(get_current_time=clock.now),
        use_plural=False,
        **kwargs,
    )
    system.register_model(Todo, indexed_fields=("priority", "title"))
    system.ensure_indexes()
    return system


@pytest.fixture
def todo_api(storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]) -> APIClient:
    system = _system(storage_factory, clock)
    for todo in TODOS:
        clock.advance(seconds=1)
        system.get_crud(Todo).create(todo, user="alice")
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


def _titles(api: APIClient, query: str, path: str = "/api/todo/data") -> list[str]:
    response = api.get(f"{path}?{query}")
    assert response.status_code == 200, response.content
    return sorted(item["title"] for item in response.json()["items"])


def test_registration_generates_a_filterset_over_the_scalar_fields(clock: Clock) -> None:
    # Given a model with strings, a bool, numbers, an enum, a literal, an optional and a list
    crud = CRUDSystem(use_plural=False).register_model(Todo)
    # When its FilterSet is read
    names = set(crud.filterset.base_filters)
    # Then every scalar field has its lookups; the list has none, and `page` (a list parameter) none
    assert {"title", "title__in", "title__range", "title__contains"} <= names
    assert {"priority", "priority__in", "priority__range", "score__range", "done", "done__in"} <= names
    assert {"colour", "colour__in", "size", "size__in", "note__isnull", "note__contains"} <= names
    assert not {name for name in names if name.startswith(("tags", "page", "done__range", "colour__range"))}
    assert "title__isnull" not in names


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("title=milk", ["milk"]),
        ("title__in=milk,apple", ["apple", "milk"]),
        ("title__contains=ilk", ["Milk powder", "milk"]),
        ("title__contains=Milk", ["Milk powder"]),
        ("title__range=Milk,milk", ["Milk powder", "Zebra crossing", "apple", "milk"]),
        ("title__range=a,", ["apple", "milk"]),
        ("done=true", ["Milk powder", "Zebra crossing"]),
        ("done__in=false", ["apple", "milk"]),
        ("priority=7", ["Zebra crossing"]),
        ("priority__in=2,10", ["apple", "milk"]),
        ("priority__range=3,7", ["Milk powder", "Zebra crossing"]),
        ("priority__range=,5", ["Milk powder", "milk"]),
        ("score__range=-3,0.5", ["Milk powder", "Zebra crossing", "apple"]),
        ("colour=blue", ["Milk powder"]),
        ("size__in=2,3", ["Milk powder", "Zebra crossing"]),
        ("note__isnull=true", ["Milk powder", "Zebra crossing", "apple"]),
        ("note__isnull=false&note__contains=litres", ["milk"]),
        ("done=false&priority__range=5,", ["apple"]),
    ],
)
def test_each_lookup_answers_the_same_on_every_storage(todo_api: APIClient, query: str, expected: list[str]) -> None:
    # Given four todos on each storage in turn
    # When the data list is filtered
    titles = _titles(todo_api, query)
    # Then the same todos come back: strings by code point, `contains` case-sensitive, ranges inclusive
    assert titles == expected


@pytest.mark.parametrize("path", ["/api/todo/data", "/api/todo/meta", "/api/todo/full", "/api/todo"])
def test_filters_apply_to_every_list_route_and_their_totals(todo_api: APIClient, path: str) -> None:
    # Given four todos, two of them done
    # When a list route is filtered on done
    body = todo_api.get(f"{path}?done=true&page_size=1").json()
    # Then its page and total hold only the done ones
    assert (body["total"], len(body["items"]), body["has_next"]) == (2, 1, True)


def test_count_is_filtered_like_the_lists(todo_api: APIClient) -> None:
    # Given four todos
    # When they are counted with and without a filter
    everything = todo_api.get("/api/todo/count").json()
    urgent = todo_api.get("/api/todo/count?priority__range=5,").json()
    # Then the filtered count holds only the matches
    assert (everything, urgent) == ({"count": 4}, {"count": 3})


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("priority=high", "priority"),
        ("priority__in=1,x", "priority__in"),
        ("priority__range=1", "priority__range"),
        ("priority=99999999999999999999", "priority"),
        ("done=maybe", "done"),
        ("colour=green", "colour"),
        ("size=4", "size"),
        ("score=nan", "score"),
        ("title__startswith=m", "title__startswith"),
        ("done__range=true,false", "done__range"),
        ("note__isnull=perhaps", "note__isnull"),
        ("priority__in=" + ",".join(["1"] * 101), "priority__in"),
        ("&".join(["priority__in=1"] * 101), "priority__in"),
    ],
)
def test_a_bad_filter_is_422_naming_its_parameter(todo_api: APIClient, query: str, parameter: str) -> None:
    # Given four todos
    # When a list is asked with a filter that does not parse or does not exist for its field
    response = todo_api.get(f"/api/todo/data?{query}")
    # Then it is a 422 validation error naming that parameter, never a 500 or an unfiltered page
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert parameter in response.json()["fields"]


def test_a_bad_filter_on_count_is_422(todo_api: APIClient) -> None:
    # Given four todos
    # When they are counted with a filter that does not parse
    response = todo_api.get("/api/todo/count?priority__range=a,b")
    # Then the count answers 422 naming it
    assert response.status_code == 422
    assert "priority__range" in response.json()["fields"]


def test_filters_never_widen_what_an_access_policy_lets_a_caller_list(
    storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]
) -> None:
    # Given todos of bob and carol, private to their creators
    system = _system(storage_factory, clock, access_policy=CreatorOnly())
    crud = system.get_crud(Todo)
    crud.create(TODOS[0], user="bob")
    crud.create(TODOS[1], user="carol")
    mount(system.create_router("/api"))
    # When bob filters on carol's todo's title
    body = APIClient().get("/api/todo/data?title=Milk%20powder", HTTP_X_USER_ID="bob").json()
    # Then he sees nothing
    assert (body["total"], body["items"]) == (0, [])


def test_python_callers_filter_with_data_filter_values(storage_factory: Callable[[str], Storage], clock: Clock) -> None:
    # Given four todos on each storage in turn
    crud = _system(storage_factory, clock).get_crud(Todo)
    for todo in TODOS:
        crud.create(todo, user="alice")
    # When a list and a count are asked with DataFilter values (an enum member included)
    params = ListQueryParams(
        data_filters=(DataFilter("priority", "range", (3, None)), DataFilter("colour", "exact", Colour.RED))
    )
    result = crud.list_with_params(params)
    counted = crud.count(data_filters=params.data_filters)
    # Then both hold the red todos of priority 3 or more
    assert sorted(item["title"] for item in result.items) == ["Zebra crossing", "apple"]
    assert counted == 2


@pytest.mark.parametrize(
    "data_filter",
    [
        DataFilter("tags", "exact", "x"),
        DataFilter("nope", "exact", 1),
        DataFilter("priority", "exact", "2"),
        DataFilter("done", "range", (False, True)),
        DataFilter("priority", "in", 2),
        DataFilter("colour", "exact", "green"),
    ],
    ids=["not scalar", "unknown field", "wrong type", "lookup not offered", "in without a list", "not a choice"],
)
def test_a_python_data_filter_that_does_not_fit_the_model_is_a_value_error(
    storage_factory: Callable[[str], Storage], clock: Clock, data_filter: DataFilter
) -> None:
    # Given the todo model on each storage in turn
    crud = _system(storage_factory, clock).get_crud(Todo)
    # When a list is asked with a filter that does not fit it
    with pytest.raises(ValueError, match=data_filter.field) as caught:
        crud.list_with_params(ListQueryParams(data_filters=(data_filter,)))
    # Then the error names the field before any storage runs it
    assert data_filter.field in str(caught.value)


def test_a_data_filter_with_an_unknown_lookup_is_a_value_error() -> None:
    # Given nothing
    # When a DataFilter names a lookup crudgen does not offer
    with pytest.raises(ValueError, match="lookup") as caught:
        DataFilter("title", "startswith", "m")
    # Then it is refused at once
    assert "startswith" not in str(caught.value) or "lookup" in str(caught.value)


def test_indexed_fields_must_be_filterable() -> None:
    # Given a system
    system = CRUDSystem(use_plural=False)
    # When a model is registered with a list field marked indexed
    with pytest.raises(ValueError, match="tags") as caught:
        system.register_model(Todo, indexed_fields=("tags",))
    # Then registration refuses it by name
    assert "indexed_fields" in str(caught.value)


def test_a_filtered_list_page_on_django_storage_is_two_queries(
    clock: Clock, mount: Callable[..., None], django_assert_max_num_queries
) -> None:
    # Given 60 todos on Django storage
    system = _system(DjangoStorage, clock)
    crud = system.get_crud(Todo)
    for index in range(60):
        crud.create({"title": f"t{index}", "done": index % 2 == 0, "priority": index % 5}, user="alice")
    mount(system.create_router("/api"))
    # When a filtered page is read
    with django_assert_max_num_queries(2):
        response = APIClient().get("/api/todo/full?priority=3&done=false&page_size=5")
    # Then the page and its total come from SQL
    assert response.json()["total"] == 6


@pytest.mark.parametrize(
    "data_filter", [DataFilter("priority", "exact", 3), DataFilter("title", "exact", "milk")], ids=["number", "string"]
)
def test_a_list_filtered_on_an_indexed_field_walks_its_expression_index(clock: Clock, data_filter: DataFilter) -> None:
    # Given the todo model on Django storage, priority and title indexed
    crud = _system(DjangoStorage, clock).get_crud(Todo)
    index_name, _ = crud.storage.index_sql(crud.filterable_fields[data_filter.field], connection.vendor)
    # When the first page filtered on the field is planned
    plan = plan_of_first_page(crud.storage, crud._effective(ListQueryParams(data_filters=(data_filter,))))
    # Then the plan uses that field's expression index and sorts nothing
    assert index_name in plan
    assert "TEMP B-TREE" not in plan.upper()
    assert "Sort " not in plan


def test_ensure_indexes_is_idempotent(clock: Clock) -> None:
    # Given a system whose indexes exist
    system = _system(DjangoStorage, clock)
    # When they are ensured again
    names = system.ensure_indexes()
    # Then nothing fails and both indexed fields are named
    assert len(names) == 2


todo_system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False)
todo_system.register_model(Todo, resource_name="migrated-todo", indexed_fields=("done",))


@override_settings(CRUDGEN_SYSTEMS=[f"{__name__}.todo_system"])
def test_migrate_creates_the_indexes_of_the_systems_in_settings() -> None:
    # Given a system listed in CRUDGEN_SYSTEMS whose `done` is indexed
    storage = todo_system.get_crud("migrated-todo").storage
    name, _ = storage.index_sql(storage.data_fields["done"], connection.vendor)
    # When migrate's post_migrate hook runs
    create_data_indexes(sender=None, using="default")
    # Then the index exists
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, "crudgen_storedresource")
    assert name in indexes
