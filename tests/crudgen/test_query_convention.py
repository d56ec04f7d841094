"""One convention for list parameters that take several values (issue 29.2): repeated keys and the
comma form mean the same on every list route and on count; a single-valued parameter given twice
with different values is a 422 naming it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from crudgen import RouteConfig
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock
from tests.crudgen.test_data_filters import TODOS, Todo, _system

pytestmark = pytest.mark.django_db

CREATORS = ["alice", "bob", "carol", "bob"]


@pytest.fixture
def todo_api(storage_factory: Callable[[str], Storage], clock: Clock, mount: Callable[..., None]) -> APIClient:
    """Four todos (milk, Milk powder, apple, Zebra crossing) made by alice, bob, carol and bob."""
    system = _system(storage_factory, clock)
    for todo, creator in zip(TODOS, CREATORS, strict=True):
        clock.advance(seconds=1)
        system.get_crud(Todo).create(todo, user=creator)
    mount(system.create_router("/api", RouteConfig()))
    return APIClient()


def _titles(api: APIClient, query: str) -> list[str]:
    response = api.get(f"/api/todo/data?{query}")
    assert response.status_code == 200, response.content
    return sorted(item["title"] for item in response.json()["items"])


@pytest.mark.parametrize(
    ("repeated", "comma", "mixed", "expected"),
    [
        ("title__in=milk&title__in=apple", "title__in=milk,apple", None, ["apple", "milk"]),
        (
            "priority__in=2&priority__in=10&priority__in=7",
            "priority__in=2,10,7",
            "priority__in=2,10&priority__in=7",
            ["Zebra crossing", "apple", "milk"],
        ),
        ("priority__range=3&priority__range=7", "priority__range=3,7", None, ["Milk powder", "Zebra crossing"]),
        ("created_by=alice&created_by=carol", "created_by=alice,carol", None, ["apple", "milk"]),
        ("updated_by=bob&updated_by=carol", "updated_by=bob,carol", None, ["Milk powder", "Zebra crossing", "apple"]),
    ],
)
def test_repeated_keys_and_the_comma_form_filter_alike(
    todo_api: APIClient, repeated: str, comma: str, mixed: str | None, expected: list[str]
) -> None:
    # Given four todos by three people, on each storage in turn
    # When one filter is sent as repeated keys, as a comma list and (where it can be) as both
    answers = [_titles(todo_api, query) for query in (repeated, comma, mixed) if query]
    # Then every form selects the same todos: every value counts, not the last one alone
    assert answers == [expected] * len(answers)


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("priority__range=1&priority__range=5&priority__range=9", "priority__range"),
        ("priority__range=1,5&priority__range=9", "priority__range"),
        ("done=true&done=false", "done"),
        ("title=milk&title=apple", "title"),
        ("page_size=5&page_size=10", "page_size"),
        ("sort_order=asc&sort_order=desc", "sort_order"),
        ("created_time_start=2026-01-01T00:00:00Z&created_time_start=2026-02-01T00:00:00Z", "created_time_start"),
    ],
)
def test_a_conflicting_value_is_422_naming_its_parameter(todo_api: APIClient, query: str, parameter: str) -> None:
    # Given four todos
    # When a range gets three values, or a one-value parameter two different ones
    response = todo_api.get(f"/api/todo/data?{query}")
    # Then the list answers 422 naming that parameter, never "the last one wins"
    assert response.status_code == 422, response.content
    assert parameter in response.json()["fields"]


def test_a_one_value_parameter_repeated_with_the_same_value_is_accepted(todo_api: APIClient) -> None:
    # Given four todos, two of them done
    # When `done=true` is sent twice
    titles = _titles(todo_api, "done=true&done=true")
    # Then it means done=true
    assert titles == ["Milk powder", "Zebra crossing"]


@pytest.mark.parametrize(
    "query",
    [
        "created_by=bob",
        "created_by=carol&created_by=alice",
        "updated_by=bob,carol",
        "created_time_start=2026-01-05T09:00:02Z",
        "created_time_end=2026-01-05T09:00:02Z&done=false",
        "title__in=milk&title__in=apple&priority__range=5,",
    ],
)
def test_count_takes_exactly_the_filters_of_its_list(todo_api: APIClient, query: str) -> None:
    # Given four todos by three people, made one second apart from 09:00:01
    # When the same filters go to the list and to count
    listed = todo_api.get(f"/api/todo/data?{query}").json()["total"]
    counted = todo_api.get(f"/api/todo/count?{query}").json()["count"]
    # Then count answers the list's total
    assert counted == listed
    assert counted < len(TODOS)


def test_a_conflicting_filter_on_count_is_422(todo_api: APIClient) -> None:
    # Given four todos
    # When count gets a one-value filter twice with different values
    response = todo_api.get("/api/todo/count?done=true&done=false")
    # Then it answers 422 naming the parameter
    assert response.status_code == 422
    assert "done" in response.json()["fields"]
