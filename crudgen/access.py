"""Access policies: who may list, read and change which resources, decided per request.

A policy is given to a `CRUDSystem` (for every model) or to one `register_model` call. The
generated routes ask it before they answer:

- `list_scope(ctx)` narrows every list and count; storages apply it where they filter (in SQL on
  `DjangoStorage`), so a page and its `total` only ever hold what the caller may see;
- `allows(ctx, action, meta)` decides one resource; a refusal answers 404 `not_found`, exactly as
  if the resource did not exist, so a stranger learns nothing (not even that it was deleted);
- `check_data(ctx, data)` sees the validated data a write is about to store (create, replace,
  patch, switch) and may raise a `CrudError` to refuse it; nothing is stored then.

The base class allows everything: a library user who sets no policy gets open routes. Calls made
from Python (`crud.update(...)`) are trusted code and skip the policy; pass `caller=` to have them
checked too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from crudgen.errors import NotFoundError

if TYPE_CHECKING:
    from crudgen.metadata import ResourceMeta
    from crudgen.plugins import RouteContext


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

    def list_scope(self, ctx: RouteContext) -> ListScope:
        return ListScope.everything()

    def allows(self, ctx: RouteContext, action: AccessAction, meta: ResourceMeta) -> bool:
        return True

    def check_data(self, ctx: RouteContext, data: dict[str, Any]) -> None:
        """Raise a `CrudError` (its status and code are the answer) to refuse data before it is stored."""


class CreatorOnly(AccessPolicy):
    """Private resources: each caller sees and changes only what they created; `sees_everything`
    (e.g. `lambda ctx: ctx.request.user.is_staff`) names callers who see all of them."""

    def __init__(self, sees_everything: Callable[[RouteContext], bool] | None = None) -> None:
        self.sees_everything = sees_everything or (lambda ctx: False)

    def list_scope(self, ctx: RouteContext) -> ListScope:
        if self.sees_everything(ctx):
            return ListScope.everything()
        return ListScope.created_by_one_of([ctx.user])

    def allows(self, ctx: RouteContext, action: AccessAction, meta: ResourceMeta) -> bool:
        return self.sees_everything(ctx) or (ctx.user is not None and meta.created_by == ctx.user)


@dataclass(frozen=True)
class Caller:
    """A policy bound to one request: what `SingleModelCRUD` checks under the resource's lock."""

    policy: AccessPolicy
    ctx: RouteContext

    def authorize(self, action: AccessAction, meta: ResourceMeta, resource_name: str) -> None:
        if not self.policy.allows(self.ctx, action, meta):
            raise NotFoundError(f"{resource_name} {meta.resource_id} not found")

    def check_data(self, data: dict[str, Any]) -> None:
        self.policy.check_data(self.ctx, data)

    @property
    def checks_data(self) -> bool:
        """False when the policy keeps the open `check_data`, so a write need not read data only to show it.

        Asked of the policy's own attribute, so a check set on the instance counts as one, too."""
        return getattr(self.policy.check_data, "__func__", None) is not AccessPolicy.check_data

    def scope(self) -> ListScope:
        return self.policy.list_scope(self.ctx)
