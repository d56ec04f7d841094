"""Value objects of crudgen's public API: list queries and results, route configuration, update operations."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any


class SortOrder(StrEnum):
    ASC = "asc"
    DESC = "desc"


class ResourceNameStyle(StrEnum):
    SNAKE = "snake"
    CAMEL = "camel"
    DASH = "dash"


class HTTPMethod(StrEnum):
    GET = "GET"
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"


class UpdateAction(StrEnum):
    SET_VALUE = "set_value"
    LIST_ADD = "list_add"
    LIST_REMOVE = "list_remove"
    DICT_UPDATE = "dict_update"


@dataclass(frozen=True)
class UpdateOperation:
    """One step of the advanced updater (`crud.modify`): an action applied to one field."""

    action: UpdateAction
    value: Any = None

    # Constructors named like autocrud 0.2's, so ported code reads the same.
    @classmethod
    def set_value(cls, value: Any) -> UpdateOperation:
        return cls(UpdateAction.SET_VALUE, value)

    @classmethod
    def list_add(cls, items: Any) -> UpdateOperation:
        return cls(UpdateAction.LIST_ADD, items)

    @classmethod
    def list_remove(cls, items: Any) -> UpdateOperation:
        return cls(UpdateAction.LIST_REMOVE, items)

    @classmethod
    def dict_update(cls, values: Mapping[str, Any]) -> UpdateOperation:
        return cls(UpdateAction.DICT_UPDATE, values)


DATA_FILTER_LOOKUPS = ("exact", "in", "range", "contains", "isnull")


@dataclass(frozen=True)
class DataFilter:
    """One condition on a data field, as Django spells it: `field__lookup=value`.

    `value` is a scalar for `exact` and `contains`, a list for `in`, a (low, high) pair for
    `range` (None for an open side) and a bool for `isnull`.
    """

    field: str
    lookup: str
    value: Any

    def __post_init__(self) -> None:
        if self.lookup not in DATA_FILTER_LOOKUPS:
            raise ValueError(f"data filter on {self.field!r}: lookup must be one of {', '.join(DATA_FILTER_LOOKUPS)}")

    @property
    def parameter(self) -> str:
        return self.field if self.lookup == "exact" else f"{self.field}__{self.lookup}"


class BackgroundTaskMode(StrEnum):
    DISABLED = "disabled"
    ENABLED = "enabled"


#: Metadata fields a list may sort on; anything else is refused rather than silently ignored.
SORTABLE_FIELDS = ("resource_id", "created_time", "updated_time", "created_by", "updated_by")

MAX_PAGE_SIZE = 1000


def _check_time_range(name: str, bounds: Any) -> None:
    """A range is (start, end), each a timezone-aware datetime or None: a naive one has no single
    meaning (local time? UTC?), so every storage refuses it the same way instead of guessing."""
    if bounds is None:
        return
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise ValueError(f"{name} must be a (start, end) pair")
    for label, bound in zip(("start", "end"), bounds, strict=True):
        if bound is None:
            continue
        if not isinstance(bound, datetime):
            raise ValueError(f"{name} {label} must be a datetime or None")
        if bound.tzinfo is None or bound.utcoffset() is None:
            raise ValueError(f"{name} {label} is a naive datetime; give it a timezone (e.g. tzinfo=UTC)")


@dataclass(frozen=True)
class ListQueryParams:
    """Filters, sort and page of a list; every filter runs in the storage (SQL for DjangoStorage)."""

    page: int = 1
    page_size: int = 20
    created_by_filter: list[str] | None = None
    updated_by_filter: list[str] | None = None
    created_time_range: tuple[datetime | None, datetime | None] | None = None
    updated_time_range: tuple[datetime | None, datetime | None] | None = None
    sort_by: str | None = None
    sort_order: SortOrder = SortOrder.DESC
    #: Conditions on data fields (`crudgen.filters`); the CRUD checks them against its model.
    data_filters: tuple[DataFilter, ...] = ()

    def __post_init__(self) -> None:
        # Refuse at construction so no storage ever sees an unbounded or negative page.
        if self.page < 1:
            raise ValueError("page must be 1 or more")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
        if self.sort_by is not None and self.sort_by not in SORTABLE_FIELDS:
            raise ValueError(f"sort_by must be one of {', '.join(SORTABLE_FIELDS)}")
        for name in ("created_time_range", "updated_time_range"):
            _check_time_range(name, getattr(self, name))
        if not all(isinstance(data_filter, DataFilter) for data_filter in self.data_filters):
            raise ValueError("data_filters must be DataFilter values")

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.page_size


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]]
    total: int
    page: int
    page_size: int
    total_pages: int
    has_next: bool
    has_prev: bool

    @classmethod
    def build(cls, items: list[dict[str, Any]], total: int, params: ListQueryParams) -> ListResult:
        total_pages = math.ceil(total / params.page_size) if total else 0
        return cls(
            items=items,
            total=total,
            page=params.page,
            page_size=params.page_size,
            total_pages=total_pages,
            has_next=params.page < total_pages,
            has_prev=params.page > 1,
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: A dependency is a DRF permission class or a callable taking the request (False or raising refuses).
Dependency = type | Callable[[Any], Any]


@dataclass
class RouteOptions:
    enabled: bool = True
    background_task: BackgroundTaskMode = BackgroundTaskMode.DISABLED
    background_task_func: Callable[[Any], Any] | None = None
    background_task_condition: Callable[[Any], bool] | None = None
    custom_status_code: int | None = None
    custom_dependencies: Sequence[Dependency] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "background_task": self.background_task.value,
            "background_task_func": self.background_task_func,
            "background_task_condition": self.background_task_condition,
            "custom_status_code": self.custom_status_code,
            "custom_dependencies": list(self.custom_dependencies) if self.custom_dependencies else None,
        }


ROUTE_KEYS = ("create", "get", "update", "delete", "list", "count")


@dataclass
class RouteConfig:
    """Which generated routes exist; a route is a bool or a RouteOptions."""

    create: bool | RouteOptions = True
    get: bool | RouteOptions = True
    update: bool | RouteOptions = True
    delete: bool | RouteOptions = True
    list: bool | RouteOptions = True
    count: bool | RouteOptions = True

    def options_for(self, key: str) -> RouteOptions:
        value = getattr(self, key, True)
        if isinstance(value, RouteOptions):
            return value
        return RouteOptions(enabled=bool(value))

    def is_enabled(self, key: str) -> bool:
        return self.options_for(key).enabled

    @classmethod
    def with_background_tasks(
        cls,
        func: Callable[[Any], Any],
        condition: Callable[[Any], bool] | None = None,
        routes: Sequence[str] = ROUTE_KEYS,
    ) -> RouteConfig:
        options = {
            key: RouteOptions(
                background_task=BackgroundTaskMode.ENABLED,
                background_task_func=func,
                background_task_condition=condition,
            )
            for key in routes
        }
        return cls(**options)

    def to_dict(self) -> dict[str, bool | dict[str, Any]]:
        result: dict[str, bool | dict[str, Any]] = {}
        for key in ROUTE_KEYS:
            value = getattr(self, key)
            result[key] = value.to_dict() if isinstance(value, RouteOptions) else bool(value)
        return result


@dataclass
class PluginRouteConfig:
    """One route a plugin contributes; `path` is relative to the model (`/stats`, `/{resource_id}/data`)."""

    name: str
    path: str
    method: HTTPMethod
    handler: Callable[..., Any]
    options: RouteOptions = field(default_factory=RouteOptions)
    response_model: Any = None
    status_code: int = 200
    summary: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    dependencies: Sequence[Dependency] | None = None
    responses: dict[int, Any] | None = None
    priority: int = 100
    request_model: Any = None
    query_parameters: Sequence[str] = ()
    #: Whether the route takes the model's data-field filters (documented in the schema).
    data_filters: bool = False
