"""One filter convention on every generated list (issue 46.2): `count` equals the `total` of each
list for every parameter and combination, `is_deleted` included; a parameter the route does not
declare, or a value it cannot take, is a 422 naming it."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from crudgen import RouteConfig
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock
from tests.crudgen.test_data_filters import TODOS, Todo, _system

pytestmark = pytest.mark.django_db

CREATORS = ["alice", "bob", "carol", "bob"]
LISTS = ("data", "meta", "full")
# The earlier route set's list (`GET /todo`) shares the others' parameters.
ALL_LISTS = (*LISTS, "")
START = "2026-01-01T00:00:00Z"


@pytest.fixture
def todo_api(storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]) -> APIClient:
    """Four todos by alice, bob, carol and bob, a second apart; bob's "Milk powder" is deleted."""
    system = _system(storage_factory, clock)
    crud = system.get_crud(Todo)
    ids = []
    for todo, creator in zip(TODOS, CREATORS, strict=True):
        clock.advance(seconds=1)
        ids.append(crud.create(todo, user=creator)["resource_id"])
    crud.delete(ids[1], user="bob")
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


def _total(api: APIClient, route: str, query: str) -> int:
    path = f"/api/todo/{route}" if route else "/api/todo"
    response = api.get(f"{path}?{query}")
    assert response.status_code == 200, (route, query, response.content)
    return response.json()["total"]


def _count(api: APIClient, query: str) -> int:
    response = api.get(f"/api/todo/count?{query}")
    assert response.status_code == 200, (query, response.content)
    return response.json()["count"]


FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "is_deleted": st.sampled_from(["true", "false"]),
        "created_by": st.lists(st.sampled_from(["alice", "bob", "carol", "zed"]), min_size=1, max_size=3),
        "updated_by": st.lists(st.sampled_from(["alice", "bob", "carol"]), min_size=1, max_size=2),
        "title__in": st.lists(st.sampled_from(["milk", "apple", "Milk powder", "nope"]), min_size=1, max_size=3),
        "title__contains": st.sampled_from(["ilk", "a", "Z"]),
        "priority__range": st.tuples(st.integers(0, 11), st.integers(0, 11)).map(lambda pair: ",".join(map(str, pair))),
        "done": st.sampled_from(["true", "false"]),
        "note__isnull": st.sampled_from(["true", "false"]),
        "created_time_start": st.sampled_from([START, "2026-01-01T00:00:02Z", "2030-01-01T00:00:00Z"]),
        "updated_time_end": st.sampled_from(["2026-01-01T00:00:03Z", "2030-01-01T00:00:00Z"]),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters=FILTERS)
def test_count_equals_every_lists_total_for_the_same_filters(todo_api: APIClient, filters: dict) -> None:
    # Given four todos, one of them deleted, and any combination of the list filters
    query = urlencode(filters, doseq=True)
    # When the same filters go to count and to every list
    count = _count(todo_api, query)
    totals = {route or "list": _total(todo_api, route, query) for route in ALL_LISTS}
    # Then each list's total is the count
    assert totals == {route: count for route in totals}, query


@pytest.mark.parametrize("route", ALL_LISTS)
def test_is_deleted_true_lists_only_the_deleted_on_every_list(todo_api: APIClient, route: str) -> None:
    # Given four todos, of which bob deleted "Milk powder"
    path = f"/api/todo/{route}" if route else "/api/todo"
    # When a list is asked for the deleted ones, and for the live ones
    deleted = todo_api.get(f"{path}?is_deleted=true").json()
    live = todo_api.get(path).json()
    # Then the first holds the deleted one alone, the second the three others
    assert (deleted["total"], live["total"]) == (1, 3)


@pytest.mark.parametrize("route", [*ALL_LISTS, "count"])
def test_an_is_deleted_that_is_not_a_boolean_is_422_on_every_list(todo_api: APIClient, route: str) -> None:
    # Given four todos
    path = f"/api/todo/{route}" if route else "/api/todo"
    # When is_deleted is neither true nor false
    response = todo_api.get(f"{path}?is_deleted=maybe")
    # Then it is a 422 naming it
    assert response.status_code == 422
    assert "is_deleted" in response.json()["fields"]


@pytest.mark.parametrize(
    ("route", "query", "parameter"),
    [
        ("data", "foo=bar", "foo"),
        ("meta", "sort=title", "sort"),
        ("full", "titel=milk", "titel"),
        ("", "page=1&pagesize=5", "pagesize"),
        ("count", "steps=a", "steps"),
        ("count", "page=2", "page"),
        ("count", "tags=a", "tags"),
    ],
)
def test_a_parameter_the_route_does_not_take_is_422_naming_it(
    todo_api: APIClient, route: str, query: str, parameter: str
) -> None:
    # Given four todos
    path = f"/api/todo/{route}" if route else "/api/todo"
    # When a list or the count is sent a parameter it does not declare (a typo, a field with no filter)
    response = todo_api.get(f"{path}?{query}")
    # Then it is a 422 naming that parameter, rather than an unfiltered answer
    assert response.status_code == 422, response.content
    assert list(response.json()["fields"]) == [parameter]


def test_a_read_of_one_resource_refuses_a_parameter_it_does_not_take(todo_api: APIClient) -> None:
    # Given a todo
    resource_id = todo_api.get("/api/todo/meta").json()["items"][0]["resource_id"]
    # When its data is read with a list's parameter
    response = todo_api.get(f"/api/todo/{resource_id}/data?page=2")
    # Then it is a 422 naming it
    assert response.status_code == 422
    assert list(response.json()["fields"]) == ["page"]


def test_drfs_format_parameter_is_still_taken(todo_api: APIClient) -> None:
    # Given four todos
    # When a list is asked for with DRF's `format=json`
    response = todo_api.get("/api/todo/data?format=json")
    # Then it answers as without it
    assert response.status_code == 200
    assert response.json()["total"] == 3


def test_a_thousand_made_up_parameters_get_a_small_422_naming_some_of_them(todo_api: APIClient) -> None:
    # Given four todos
    # When a list is sent a thousand parameters it does not take, some of them long
    query = "&".join(f"x{number}{'y' * 500}=1" for number in range(900))
    response = todo_api.get(f"/api/todo/data?{query}")
    # Then it is a 422 naming twenty of them, each cut short, and saying how many more there are
    assert response.status_code == 422
    assert len(response.json()["fields"]) == 20
    assert "and 880 more" in response.json()["detail"]
    assert len(response.content) < 10_000


def test_head_of_a_list_answers_like_its_get_without_a_body(todo_api: APIClient) -> None:
    # Given four todos
    # When a list is asked for with HEAD
    response = todo_api.head("/api/todo/data")
    # Then it answers 200, as its GET does, with no body
    assert response.status_code == 200
    assert response.content == b""
