"""Access policies: who may list, read and change which resources, decided for an actor.

A policy is given to a `CRUDSystem` (for every model) or to one `register_model` call. It answers
for an `Actor` (who acts: a user id and whether they are staff), not for a request, so a route, a
page and a job off the request path (a scheduled run) put it the same question. The generated
routes ask it, for the route's actor (`RouteContext.actor`), before they answer:

- `list_scope(actor)` narrows every list and count; storages apply it where they filter (in SQL on
  `DjangoStorage`), so a page and its `total` only ever hold what the caller may see;
- `allows(actor, action, meta)` decides one resource; a refusal answers 404 `not_found`, exactly
  as if the resource did not exist, so a stranger learns nothing (not even that it was deleted);
- `check_data(actor, data)` sees the validated data a write is about to store (create, replace,
  patch, switch) and may raise a `CrudError` to refuse it; nothing is stored then.

The base class allows everything: a library user who sets no policy gets open routes. Calls made
from Python (`crud.update(...)`) are trusted code and skip the policy; pass `caller=` (for example
`crud.caller_for(actor)`) to have them checked too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from crudgen.errors import NotFoundError

if TYPE_CHECKING:
    from crudgen.metadata import ResourceMeta


@runtime_checkable
class Actor(Protocol):
    """Who acts, as a policy sees them. Any object with these two attributes will do: an
    application passes its own actor type; crudgen makes a `PlainActor` for a route."""

    @property
    def user_id(self) -> str | None: ...

    @property
    def is_staff(self) -> bool: ...


@dataclass(frozen=True)
class PlainActor:
    """crudgen's own actor: a route's acting user (`RouteContext.user`) and the request user's
    `is_staff` (False where the user has none); `PlainActor()` is nobody."""

    user_id: str | None = None
    is_staff: bool = False


class AccessAction(StrEnum):
    """What a request does to one existing resource."""

    READ = "read"
    UPDATE = "update"
    PATCH = "patch"
    DELETE = "delete"
    RESTORE = "restore"
    SWITCH = "switch"
    READ_REVISIONS = "read_revisions"


@dataclass(frozen=True)
class ListScope:
    """The part of a model's resources a caller may list.

    `created_by=None` is everything; a set keeps the resources created by one of its users (an
    empty set keeps none). It filters on the creator column, which `DjangoStorage` indexes
    together with the deleted flag and the sort columns.
    """

    created_by: frozenset[str] | None = None

    @classmethod
    def everything(cls) -> ListScope:
        return cls()

    @classmethod
    def created_by_one_of(cls, users: Iterable[str | None]) -> ListScope:
        return cls(created_by=frozenset(user for user in users if user))

    @property
    def is_everything(self) -> bool:
        return self.created_by is None

    def admits(self, meta: ResourceMeta) -> bool:
        """The same rule in Python, for storages without a query engine."""
        return self.created_by is None or meta.created_by in self.created_by


class AccessPolicy:
    """Open: everyone lists, reads and changes everything. Subclass and override what you restrict."""

    #: Statuses `check_data` may answer with, so the OpenAPI document lists them on every write.
    data_refusal_statuses: tuple[int, ...] = ()
    #: What `check_data` takes of a field, beyond its type in the model, as JSON Schema (2020-12):
    #: the create and replace bodies of the document say it (`{"every_seconds": {"minimum": 60}}`
    #: merged over the field's own schema). Stored data is not held to it, so responses are not.
    data_field_schemas: Mapping[str, Mapping[str, Any]] = MappingProxyType({})

    def list_scope(self, actor: Actor) -> ListScope:
        return ListScope.everything()

    def allows(self, actor: Actor, action: AccessAction, meta: ResourceMeta) -> bool:
        return True

    def check_data(self, actor: Actor, data: dict[str, Any]) -> None:
        """Raise a `CrudError` (its status and code are the answer) to refuse data before it is stored."""


class CreatorOnly(AccessPolicy):
    """Private resources: each actor sees and changes only what they created; `sees_everything`
    (e.g. `lambda actor: actor.is_staff`) names actors who see all of them."""

    def __init__(self, sees_everything: Callable[[Actor], bool] | None = None) -> None:
        self.sees_everything = sees_everything or (lambda actor: False)

    def list_scope(self, actor: Actor) -> ListScope:
        if self.sees_everything(actor):
            return ListScope.everything()
        return ListScope.created_by_one_of([actor.user_id])

    def allows(self, actor: Actor, action: AccessAction, meta: ResourceMeta) -> bool:
        return self.sees_everything(actor) or (bool(actor.user_id) and meta.created_by == actor.user_id)


@dataclass(frozen=True)
class Caller:
    """A policy bound to one actor: what `SingleModelCRUD` checks under the resource's lock."""

    policy: AccessPolicy
    actor: Actor

    def authorize(self, action: AccessAction, meta: ResourceMeta, resource_name: str) -> None:
        if not self.policy.allows(self.actor, action, meta):
            raise NotFoundError(f"{resource_name} {meta.resource_id} not found")

    def check_data(self, data: dict[str, Any]) -> None:
        self.policy.check_data(self.actor, data)

    @property
    def checks_data(self) -> bool:
        """False when the policy keeps the open `check_data`, so a write need not read data only to show it.

        Asked of the policy's own attribute, so a check set on the instance counts as one, too."""
        return getattr(self.policy.check_data, "__func__", None) is not AccessPolicy.check_data

    def scope(self) -> ListScope:
        return self.policy.list_scope(self.actor)
