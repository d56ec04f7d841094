"""Query-string parsing for list routes: ListQueryParams, with a message per bad parameter (422).

One convention for every parameter that takes several values (`created_by`, `updated_by`, a
data filter's `__in` and `__range`): repeated keys (`name__in=a&name__in=b`, what OpenAPI's
default `form` style with `explode` sends) and the comma form (`name__in=a,b`) both work, may be
mixed, and mean the same. A range takes exactly two values, low and high, either way; an empty
side is open (`priority__range=,5`). Every other parameter takes one value: the same key given
twice with different values is a 422 naming it, never "the last one wins". A parameter whose
value is typed (a number, a date-time, a boolean, one of an enum) given empty (`page=`) is a 422
too, as the document says: leave it out to mean its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.http import QueryDict
from django.utils.dateparse import parse_datetime

from crudgen.errors import ValidationFailed
from crudgen.types import MAX_PAGE_SIZE, SORTABLE_FIELDS, DataFilter, ListQueryParams, SortOrder

if TYPE_CHECKING:
    from crudgen.filters import DataFilterSet

#: The highest page number a list takes (the document's `maximum`).
MAX_PAGE = 10**9
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


#: The list parameters that take several values; a data filter's are those ending in these lookups.
MULTI_VALUED_PARAMETERS = frozenset({"created_by", "updated_by"})
MULTI_VALUED_LOOKUPS = ("__in", "__range")


def is_multi_valued(name: str) -> bool:
    return name in MULTI_VALUED_PARAMETERS or name.endswith(MULTI_VALUED_LOOKUPS)


def _raw_values(query: Any, name: str) -> list[str]:
    if hasattr(query, "getlist"):
        return [str(value) for value in query.getlist(name)]
    value = query.get(name)
    return [] if value is None else [str(value)]


def multi_values(query: Any, name: str) -> list[str]:
    """Every value of a multi-valued parameter, from repeated keys, comma lists, or both."""
    return [part.strip() for value in _raw_values(query, name) for part in value.split(",")]


def normalised_query(query: Any) -> tuple[QueryDict, dict[str, str]]:
    """The query with one value per key (a multi-valued key's values joined by commas), and an
    error per single-valued key given twice with different values."""
    normalised = QueryDict(mutable=True)
    errors: dict[str, str] = {}
    for name in query:
        values = _raw_values(query, name)
        if is_multi_valued(name):
            normalised[name] = ",".join(values)
        elif len(set(values)) > 1:
            errors[name] = "takes one value; it was given more than once with different values"
        elif values:
            normalised[name] = values[0]
    return normalised, errors


EMPTY = "must not be empty (leave the parameter out for its default)"


def _int_param(query: Mapping[str, Any], name: str, default: int, errors: dict[str, str], upper: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if raw == "":
        errors[name] = EMPTY
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
    if raw is None:
        return None
    if raw == "":
        errors[name] = EMPTY
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
    query, errors = normalised_query(query)
    page = _int_param(query, "page", 1, errors, upper=MAX_PAGE)
    page_size = _int_param(query, "page_size", 20, errors, upper=MAX_PAGE_SIZE)
    sort_by = query.get("sort_by")
    if sort_by is not None and sort_by not in SORTABLE_FIELDS:
        errors["sort_by"] = f"must be one of {', '.join(SORTABLE_FIELDS)}"
        sort_by = None
    sort_order_raw = query.get("sort_order", SortOrder.DESC.value).lower()
    if sort_order_raw not in {order.value for order in SortOrder}:
        errors["sort_order"] = "must be asc or desc"
    filters = _filters(query, filterset, errors)
    if errors:
        raise ValidationFailed(errors)
    return replace(filters, page=page, page_size=page_size, sort_by=sort_by, sort_order=SortOrder(sort_order_raw))


def parse_filter_params(query: Any, filterset: type[DataFilterSet] | None = None) -> ListQueryParams:
    """Only the filters of a list's query string, as ListQueryParams (the count route: no page, no sort)."""
    query, errors = normalised_query(query)
    filters = _filters(query, filterset, errors)
    if errors:
        raise ValidationFailed(errors)
    return filters


def _filters(query: QueryDict, filterset: type[DataFilterSet] | None, errors: dict[str, str]) -> ListQueryParams:
    """The filtering part of a list's parameters (users, time ranges, data fields); adds to `errors`."""
    times = {
        name: _time_param(query, name, errors) for name in LIST_QUERY_PARAMETERS if name.endswith(("_start", "_end"))
    }

    def time_range(prefix: str) -> tuple[datetime | None, datetime | None] | None:
        bounds = (times[f"{prefix}_start"], times[f"{prefix}_end"])
        return bounds if any(bounds) else None

    def users(name: str) -> list[str] | None:
        return [value for value in multi_values(query, name) if value] or None

    return ListQueryParams(
        created_by_filter=users("created_by"),
        updated_by_filter=users("updated_by"),
        created_time_range=time_range("created_time"),
        updated_time_range=time_range("updated_time"),
        data_filters=_data_filters(query, filterset, errors),
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


def bool_param(query: Mapping[str, Any], name: str) -> bool | None:
    values = set(_raw_values(query, name))
    if len(values) > 1:
        raise ValidationFailed({name: "takes one value; it was given more than once with different values"})
    raw = values.pop() if values else None
    if raw is None:
        return None
    try:
        return parse_bool(raw)
    except ValueError as exc:
        raise ValidationFailed({name: str(exc)}) from exc
