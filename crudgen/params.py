"""Query-string parsing for list routes: ListQueryParams, with a message per bad parameter (422)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.utils.dateparse import parse_datetime

from crudgen.errors import ValidationFailed
from crudgen.types import MAX_PAGE_SIZE, SORTABLE_FIELDS, DataFilter, ListQueryParams, SortOrder

if TYPE_CHECKING:
    from crudgen.filters import DataFilterSet

LIST_QUERY_PARAMETERS = (
    "page",
    "page_size",
    "created_by",
    "updated_by",
    "created_time_start",
    "created_time_end",
    "updated_time_start",
    "updated_time_end",
    "sort_by",
    "sort_order",
)


def parse_bool(raw: str) -> bool:
    """`true`/`1`/`yes` or `false`/`0`/`no`, any case; anything else is a ValueError."""
    lowered = raw.strip().lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no"}:
        return False
    raise ValueError("must be true or false")


def _int_param(query: Mapping[str, Any], name: str, default: int, errors: dict[str, str], upper: int) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        errors[name] = "must be an integer"
        return default
    if not 1 <= value <= upper:
        errors[name] = f"must be between 1 and {upper}"
    return value


def _time_param(query: Mapping[str, Any], name: str, errors: dict[str, str]) -> datetime | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        parsed = parse_datetime(raw.replace(" ", "+"))
    except ValueError:  # well formed but not a date, e.g. month 13
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        errors[name] = "must be an ISO 8601 date-time with a timezone"
        return None
    try:
        # In UTC: PostgreSQL refuses offsets beyond ±15:59 that Python accepts (up to ±23:59).
        return parsed.astimezone(UTC)
    except OverflowError:
        errors[name] = "is out of range once converted to UTC"
        return None


def parse_list_params(query: Any, filterset: type[DataFilterSet] | None = None) -> ListQueryParams:
    """ListQueryParams from a query string; every problem is reported per parameter (422).

    `filterset` (the model's generated FilterSet) parses the data-field filters.
    """
    errors: dict[str, str] = {}
    page = _int_param(query, "page", 1, errors, upper=10**9)
    page_size = _int_param(query, "page_size", 20, errors, upper=MAX_PAGE_SIZE)
    times = {
        name: _time_param(query, name, errors) for name in LIST_QUERY_PARAMETERS if name.endswith(("_start", "_end"))
    }
    sort_by = query.get("sort_by") or None
    if sort_by is not None and sort_by not in SORTABLE_FIELDS:
        errors["sort_by"] = f"must be one of {', '.join(SORTABLE_FIELDS)}"
    sort_order_raw = (query.get("sort_order") or SortOrder.DESC.value).lower()
    if sort_order_raw not in {order.value for order in SortOrder}:
        errors["sort_order"] = "must be asc or desc"
    data_filters = _data_filters(query, filterset, errors)
    if errors:
        raise ValidationFailed(errors)

    def time_range(prefix: str) -> tuple[datetime | None, datetime | None] | None:
        bounds = (times[f"{prefix}_start"], times[f"{prefix}_end"])
        return bounds if any(bounds) else None

    return ListQueryParams(
        page=page,
        page_size=page_size,
        created_by_filter=query.getlist("created_by") or None if hasattr(query, "getlist") else None,
        updated_by_filter=query.getlist("updated_by") or None if hasattr(query, "getlist") else None,
        created_time_range=time_range("created_time"),
        updated_time_range=time_range("updated_time"),
        sort_by=sort_by,
        sort_order=SortOrder(sort_order_raw),
        data_filters=data_filters,
    )


def _data_filters(query: Any, filterset: type[DataFilterSet] | None, errors: dict[str, str]) -> tuple[DataFilter, ...]:
    # Most list requests filter on no data field: they skip building the FilterSet's form.
    if filterset is None or not any(name.partition("__")[0] in filterset.fields_by_name for name in query):
        return ()
    try:
        return filterset(data=query).data_filters()
    except ValidationFailed as exc:
        errors.update(exc.fields)
        return ()


def parse_data_filters(query: Any, filterset: type[DataFilterSet] | None) -> tuple[DataFilter, ...]:
    """Only the data-field filters of a query string (the count route has no page or sort)."""
    errors: dict[str, str] = {}
    found = _data_filters(query, filterset, errors)
    if errors:
        raise ValidationFailed(errors)
    return found


def bool_param(query: Mapping[str, Any], name: str) -> bool | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        return parse_bool(raw)
    except ValueError as exc:
        raise ValidationFailed({name: str(exc)}) from exc
