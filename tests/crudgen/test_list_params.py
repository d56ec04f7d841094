"""ListQueryParams from Python: a naive datetime in a time range is one clear error on every storage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from crudgen import CRUDSystem, ListQueryParams
from tests.crudgen.conftest import Workflow

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("field", ["created_time_range", "updated_time_range"])
@pytest.mark.parametrize(
    "bounds",
    [
        (datetime(2000, 1, 1), None),  # noqa: DTZ001 (naive on purpose)
        (None, datetime(2000, 1, 1)),  # noqa: DTZ001
        (datetime(2000, 1, 1, tzinfo=UTC), datetime(2001, 1, 1)),  # noqa: DTZ001
    ],
    ids=["naive start", "naive end", "naive end after an aware start"],
)
def test_a_naive_datetime_in_a_time_range_is_a_value_error_naming_the_field_on_every_storage(
    system: CRUDSystem, field: str, bounds: tuple
) -> None:
    # Given a workflow on each storage backend in turn
    crud = system.get_crud(Workflow)
    crud.create({"name": "w", "steps": []}, user="alice")
    # When a list is asked for with a naive bound
    with pytest.raises(ValueError, match=field) as caught:
        crud.list_with_params(ListQueryParams(**{field: bounds}))
    # Then the error says what to do, and no storage guessed a time zone
    assert "naive" in str(caught.value)


def test_an_aware_time_range_in_any_offset_lists_on_every_storage(system: CRUDSystem) -> None:
    # Given a workflow created at 09:00 UTC (the fixture clock)
    crud = system.get_crud(Workflow)
    crud.create({"name": "w", "steps": []}, user="alice")
    # When one range starts at 10:00+02:00 (08:00 UTC) and another at 12:00+02:00 (10:00 UTC)
    plus_two = timezone(timedelta(hours=2))
    before = crud.list_with_params(
        ListQueryParams(created_time_range=(datetime(2026, 1, 5, 10, tzinfo=plus_two), None))
    )
    after = crud.list_with_params(ListQueryParams(created_time_range=(datetime(2026, 1, 5, 12, tzinfo=plus_two), None)))
    # Then the instant is compared, not the wall-clock reading
    assert (before.total, after.total) == (1, 0)


@pytest.mark.parametrize(
    "bounds", [(1, None), (datetime(2000, 1, 1, tzinfo=UTC),)], ids=["not a datetime", "not a pair"]
)
def test_a_time_range_that_is_not_a_pair_of_datetimes_is_a_value_error(bounds: tuple) -> None:
    # Given a malformed range
    # When ListQueryParams is built with it
    with pytest.raises(ValueError, match="created_time_range") as caught:
        ListQueryParams(created_time_range=bounds)
    # Then the error names the field (no storage ever sees it)
    assert "created_time_range" in str(caught.value)
