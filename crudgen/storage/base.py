"""The storage contract every backend meets, and the in-Python list filter the file-less backends share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from crudgen.access import ListScope
from crudgen.filters import passes
from crudgen.metadata import ResourceMeta, Revision
from crudgen.types import ListQueryParams, SortOrder

if TYPE_CHECKING:
    from crudgen.filters import FilterableField


@dataclass(frozen=True)
class Stored:
    """A resource as read: its metadata and its current data."""

    meta: ResourceMeta
    data: dict[str, Any]


T = TypeVar("T")


class StaleState(Exception):
    """Another writer changed the resource after the state a write was decided on; nothing was stored."""


class WriteSession(Protocol):
    """What a write sees: the current state, and the ways to save a new one built on it.

    A session may also offer `save_switched(meta) -> bool`, see `save_switched`.
    """

    current: Stored

    def revision(self, revision_id: str) -> Revision | None: ...

    def save(self, meta: ResourceMeta, data: dict[str, Any], new_revision: Revision | None = None) -> None: ...


def save_switched(session: WriteSession, meta: ResourceMeta) -> bool:
    """Saves `meta` with the stored data of its `current_revision_id`; False (nothing saved) when the
    resource has no such revision. A session with a `save_switched` of its own does it (DjangoStorage
    on PostgreSQL, within its one statement); any other reads the revision, then saves its data."""
    own = getattr(session, "save_switched", None)
    if own is not None:
        return bool(own(meta))
    target = session.revision(meta.current_revision_id)
    if target is None:
        return False
    session.save(meta, target.data)
    return True


class Storage(ABC):
    """A place for one model's resources and revisions.

    `write(resource_id, decide)` is the only way to change an existing resource: what `decide`
    saves is stored only if the state it was given is still the current one, so two writers can
    never both build on the same revision. By default the state is read under a lock
    (`locked`); DjangoStorage on PostgreSQL writes optimistically instead (see there).
    """

    namespace: str | None = None
    data_fields: dict[str, FilterableField] = {}
    indexed_fields: tuple[str, ...] = ()

    def attach(self, namespace: str) -> None:
        """Called by the CRUD that owns this storage; a storage given an explicit namespace keeps it."""
        if self.namespace is None:
            self.namespace = namespace

    def describe_data(self, fields: Mapping[str, FilterableField], indexed: Sequence[str]) -> None:
        """Called by the CRUD: its model's filterable fields, and those its registration marks indexed.

        A storage with a query engine uses them to compare values by kind and to build indexes.
        """
        self.data_fields = dict(fields)
        self.indexed_fields = tuple(indexed)

    @abstractmethod
    def insert(self, meta: ResourceMeta, revision: Revision, data: dict[str, Any]) -> None: ...

    @abstractmethod
    def fetch(self, resource_id: str) -> Stored | None: ...

    @abstractmethod
    def fetch_revision(self, resource_id: str, revision_id: str) -> Revision | None: ...

    @abstractmethod
    def locked(self, resource_id: str) -> AbstractContextManager[WriteSession | None]:
        """The current state read under a lock held until the block ends (None: no such resource)."""

    def write(self, resource_id: str, decide: Callable[[WriteSession | None], T]) -> T:
        """Runs `decide` on the resource's current state (None: no such resource) and keeps what it
        saves, as one atomic step; returns what `decide` returns.

        `decide` raises before it saves and depends on nothing but the state it is given: a storage
        may run it again on a fresher state (and keep only the last run's outcome).
        """
        with self.locked(resource_id) as session:
            return decide(session)

    @abstractmethod
    def select(
        self, params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None = None
    ) -> tuple[list[Stored], int]:
        """One page of resources matching the params within the access scope, and the total count of matches."""

    @abstractmethod
    def count(
        self, is_deleted: bool | None = False, scope: ListScope | None = None, params: ListQueryParams | None = None
    ) -> int:
        """How many resources `select` would match in all with these params (their page and sort aside)."""

    @abstractmethod
    def revisions(self, resource_id: str, offset: int, limit: int) -> tuple[list[Revision], int]:
        """Revisions of one resource, newest first, and how many there are."""

    @abstractmethod
    def export(self) -> Iterator[tuple[Stored, list[Revision]]]:
        """Every resource with all its revisions (oldest first), for dump and schema migration."""

    @abstractmethod
    def replace(self, stored: Stored, revisions: list[Revision]) -> None:
        """Write a resource and its whole history as given, replacing any existing one (load, migrate)."""

    @abstractmethod
    def replace_if_unchanged(self, stored: Stored, revisions: list[Revision], *, seen: ResourceMeta) -> bool:
        """`replace`, as one atomic step with checking that the resource is still as `seen` (no write
        since it was read); False, and nothing written, when it is not or is gone (migrate)."""

    def ensure_indexes(self, using: str | None = None) -> list[str]:
        """Create what makes indexed data filters fast, where missing; a storage without indexes has none."""
        return []

    def exists(self, resource_id: str) -> bool:
        return self.fetch(resource_id) is not None

    def atomic(self) -> AbstractContextManager[None]:
        """A unit of work that writes all or nothing where the backend can (a database can)."""
        return nullcontext()


def _in_range(value: datetime, bounds: tuple[datetime | None, datetime | None] | None) -> bool:
    if bounds is None:
        return True
    start, end = bounds
    return (start is None or value >= start) and (end is None or value <= end)


def in_scope(candidates: Iterable[Stored], is_deleted: bool | None, scope: ListScope | None) -> list[Stored]:
    return [
        item
        for item in candidates
        if (is_deleted is None or item.meta.is_deleted == is_deleted) and (scope is None or scope.admits(item.meta))
    ]


def matching(
    candidates: Iterable[Stored], params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None = None
) -> list[Stored]:
    """The candidates that pass the params' filters within the scope, in no particular order."""
    return [
        item
        for item in in_scope(candidates, is_deleted, scope)
        if (not params.created_by_filter or item.meta.created_by in params.created_by_filter)
        and (not params.updated_by_filter or item.meta.updated_by in params.updated_by_filter)
        and _in_range(item.meta.created_time, params.created_time_range)
        and _in_range(item.meta.updated_time, params.updated_time_range)
        and passes(item.data, params.data_filters)
    ]


def filter_sort_page(
    candidates: Iterable[Stored], params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None = None
) -> tuple[list[Stored], int]:
    """The same semantics DjangoStorage runs in SQL, for backends without a query engine."""
    matches = matching(candidates, params, is_deleted, scope)
    key_field = params.sort_by or "created_time"
    reverse = params.sort_order == SortOrder.DESC

    def key(item: Stored) -> tuple[bool, Any, str]:
        value = getattr(item.meta, key_field)
        # None sorts last ascending and first descending, as PostgreSQL does by default.
        return (value is None, value if value is not None else "", item.meta.resource_id)

    matches.sort(key=key, reverse=reverse)
    return matches[params.offset : params.offset + params.page_size], len(matches)


class ScannedStorage(Storage):
    """A backend without a query engine: lists and counts filter every resource in Python."""

    @abstractmethod
    def _all(self) -> list[Stored]: ...

    @abstractmethod
    def _exclusive(self) -> AbstractContextManager[object]:
        """Holds off every other write to this storage while the block runs."""

    @abstractmethod
    def _replace_held(self, stored: Stored, revisions: list[Revision]) -> None:
        """What `replace` writes, run under `_exclusive`."""

    def replace(self, stored: Stored, revisions: list[Revision]) -> None:
        with self._exclusive():
            self._replace_held(stored, revisions)

    def replace_if_unchanged(self, stored: Stored, revisions: list[Revision], *, seen: ResourceMeta) -> bool:
        with self._exclusive():
            current = self.fetch(stored.meta.resource_id)
            if current is None or current.meta != seen:
                return False
            self._replace_held(stored, revisions)
            return True

    def select(
        self, params: ListQueryParams, is_deleted: bool | None, scope: ListScope | None = None
    ) -> tuple[list[Stored], int]:
        return filter_sort_page(self._all(), params, is_deleted, scope)

    def count(
        self, is_deleted: bool | None = False, scope: ListScope | None = None, params: ListQueryParams | None = None
    ) -> int:
        return len(matching(self._all(), params or ListQueryParams(), is_deleted, scope))
