"""Route plugins: every generated route is a plugin with a priority; the manager resolves overrides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crudgen.access import Actor, Caller, PlainActor
from crudgen.errors import ValidationFailed
from crudgen.metadata import meta_view
from crudgen.params import LIST_QUERY_PARAMETERS, bool_param, parse_filter_params, parse_list_params
from crudgen.types import HTTPMethod, PluginRouteConfig

if TYPE_CHECKING:
    from crudgen.crud import SingleModelCRUD


@dataclass
class RouteContext:
    """What a route handler gets: the DRF request, the CRUD, path arguments and the acting user.

    `actor` is who the access policy decides for: unless given, the acting user with the request
    user's `is_staff` (a `PlainActor`).
    """

    request: Any
    crud: SingleModelCRUD
    kwargs: dict[str, Any]
    user: str | None
    etag: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    actor: Actor | None = None

    def __post_init__(self) -> None:
        if self.actor is None:
            request_user = getattr(self.request, "user", None)
            self.actor = PlainActor(self.user, bool(getattr(request_user, "is_staff", False)))

    @property
    def if_match(self) -> str | None:
        return self.request.headers.get("If-Match")

    @property
    def query(self) -> Mapping[str, Any]:
        return self.request.query_params

    @property
    def caller(self) -> Caller:
        """The CRUD's access policy bound to this route's actor; a custom route passes it to every read and write."""
        return self.crud.caller_for(self.actor)


# -- default handlers --------------------------------------------------------------------------


def _meta_body(ctx: RouteContext, meta: Any) -> dict[str, Any]:
    ctx.etag = meta.current_revision_id
    return meta_view(meta, ctx.crud.metadata_config)


def _as_caller(ctx: RouteContext) -> dict[str, Any]:
    """Who writes, on which revision, under which access policy: what every change is given."""
    return {"user": ctx.user, "if_match": ctx.if_match, "caller": ctx.caller}


def handle_create(ctx: RouteContext) -> dict[str, Any]:
    meta = ctx.crud.create_meta(ctx.request.data, user=ctx.user, caller=ctx.caller)
    # The new resource's own address (the earlier route set's `GET /<m>/<id>`).
    ctx.headers["Location"] = f"{ctx.request.path.rstrip('/')}/{meta.resource_id}"
    return _meta_body(ctx, meta)


def handle_read_data(ctx: RouteContext) -> dict[str, Any]:
    stored = ctx.crud.read_live(ctx.kwargs["resource_id"], caller=ctx.caller)
    ctx.etag = stored.meta.current_revision_id
    return stored.data


def handle_read_meta(ctx: RouteContext) -> dict[str, Any]:
    return _meta_body(ctx, ctx.crud.read(ctx.kwargs["resource_id"], caller=ctx.caller).meta)


def handle_read_full(ctx: RouteContext) -> dict[str, Any]:
    shape = ctx.query.get("shape", "meta")
    if shape not in {"meta", "revision_info"}:
        raise ValidationFailed({"shape": "must be meta or revision_info"})
    stored = ctx.crud.read(ctx.kwargs["resource_id"], caller=ctx.caller)
    ctx.etag = stored.meta.current_revision_id
    return ctx.crud.full_view(stored, shape)


def handle_update(ctx: RouteContext) -> dict[str, Any]:
    meta = ctx.crud.update_meta(ctx.kwargs["resource_id"], ctx.request.data, **_as_caller(ctx))
    return _meta_body(ctx, meta)


def handle_patch(ctx: RouteContext) -> dict[str, Any]:
    meta = ctx.crud.patch_meta(ctx.kwargs["resource_id"], ctx.request.data, **_as_caller(ctx))
    return _meta_body(ctx, meta)


def handle_delete(ctx: RouteContext) -> dict[str, Any]:
    return _meta_body(ctx, ctx.crud.delete_meta(ctx.kwargs["resource_id"], **_as_caller(ctx)))


def handle_restore(ctx: RouteContext) -> dict[str, Any]:
    # The spec's restore takes `is_deleted`: `true` states the resource is deleted (409 when it is
    # not); left out, restoring a live resource is a harmless no-op; `false` asks for nothing.
    stated = bool_param(ctx.query, "is_deleted")
    if stated is False:
        raise ValidationFailed({"is_deleted": "restore brings back a deleted resource: pass true, or leave it out"})
    meta = ctx.crud.restore_meta(ctx.kwargs["resource_id"], require_deleted=bool(stated), **_as_caller(ctx))
    return _meta_body(ctx, meta)


def handle_switch(ctx: RouteContext) -> dict[str, Any]:
    meta = ctx.crud.switch_meta(ctx.kwargs["resource_id"], ctx.kwargs["revision_id"], **_as_caller(ctx))
    return _meta_body(ctx, meta)


def _list_handler(view: str) -> Callable[[RouteContext], dict[str, Any]]:
    """A list's handler: the same filters as the count route, `is_deleted` among them, so that a
    count always equals the `total` of the list it counts."""

    def handle(ctx: RouteContext) -> dict[str, Any]:
        params = parse_list_params(ctx.query, ctx.crud.filterset)
        is_deleted = bool_param(ctx.query, "is_deleted")
        result = ctx.crud.list_with_params(params, is_deleted=bool(is_deleted), view=view, scope=ctx.caller.scope())
        return result.to_dict()

    return handle


def handle_count(ctx: RouteContext) -> dict[str, Any]:
    is_deleted = bool_param(ctx.query, "is_deleted")
    filters = parse_filter_params(ctx.query, ctx.crud.filterset)
    return {"count": ctx.crud.count(is_deleted=bool(is_deleted), scope=ctx.caller.scope(), params=filters)}


def handle_revision_list(ctx: RouteContext) -> dict[str, Any]:
    params = parse_list_params(ctx.query)
    revisions = ctx.crud.list_revisions(ctx.kwargs["resource_id"], params.page, params.page_size, caller=ctx.caller)
    return revisions.to_dict()


# -- plugins and their manager ----------------------------------------------------------------


@dataclass
class RoutePlugin:
    """One route; `route_key` names the RouteConfig entry (create, get, update, delete, list, count) it obeys."""

    name: str
    method: HTTPMethod
    path: str
    handler: Callable[[RouteContext], Any]
    priority: int = 100
    route_key: str | None = None
    status_code: int = 200
    summary: str = ""
    request_body: str | None = None
    response_body: str = "meta"
    query_parameters: tuple[str, ...] = ()
    data_filters: bool = False
    description: str = ""

    def get_routes(self, crud: SingleModelCRUD) -> list[PluginRouteConfig]:
        return [
            PluginRouteConfig(
                name=self.name,
                path=self.path,
                method=self.method,
                handler=self.handler,
                status_code=self.status_code,
                summary=f"{self.summary} ({crud.resource_name})" if self.summary else None,
                description=self.description or None,
                tags=[crud.resource_name],
                priority=self.priority,
                response_model=self.response_body,
                request_model=self.request_body,
                query_parameters=self.query_parameters,
                data_filters=self.data_filters,
            )
        ]


@dataclass(frozen=True)
class ResolvedRoute:
    config: PluginRouteConfig
    route_key: str | None
    is_default: bool


_LIST = (*LIST_QUERY_PARAMETERS, "is_deleted")
_NO_OP_WRITE_HELP = (
    "Data identical to the current revision (an identical PUT, a patch that changes nothing) makes no new "
    "revision: the answer names the current one."
)
_RESTORE_HELP = (
    "Brings back a soft-deleted resource. `is_deleted=true` states that it is deleted: when it is not, "
    "409 `not_deleted` and nothing changes. Without it, restoring a live resource changes nothing and "
    "answers its metadata. `is_deleted=false` is a 422."
)
# What a list is narrowed by (its page and sort aside): the count route takes exactly these.
_FILTERS = tuple(name for name in LIST_QUERY_PARAMETERS if name not in ("page", "page_size", "sort_by", "sort_order"))
_RID = "/{resource_id}"


def default_plugins() -> list[RoutePlugin]:
    """The spec's current route set, the earlier set, and `revision-list`.

    Fixed paths get lower numbers than `{resource_id}` paths so they are matched first.
    """
    get, ls, upd = HTTPMethod.GET, "list", "update"
    return [
        RoutePlugin("create", HTTPMethod.POST, "", handle_create, 10, "create", 201, "Create", "model"),
        RoutePlugin(
            "list_data",
            get,
            "/data",
            _list_handler("data"),
            20,
            ls,
            summary="List data",
            response_body="list_data",
            query_parameters=_LIST,
            data_filters=True,
        ),
        RoutePlugin(
            "list_meta",
            get,
            "/meta",
            _list_handler("meta"),
            20,
            ls,
            summary="List metadata",
            response_body="list_meta",
            query_parameters=_LIST,
            data_filters=True,
        ),
        RoutePlugin(
            "list_full",
            get,
            "/full",
            _list_handler("full"),
            20,
            ls,
            summary="List data with metadata",
            response_body="list_full",
            query_parameters=_LIST,
            data_filters=True,
        ),
        RoutePlugin(
            "count",
            get,
            "/count",
            handle_count,
            20,
            "count",
            summary="Count",
            response_body="count",
            query_parameters=("is_deleted", *_FILTERS),
            data_filters=True,
        ),
        RoutePlugin(
            "list",
            get,
            "",
            _list_handler("data"),
            30,
            ls,
            summary="List (earlier route set)",
            response_body="list_data",
            query_parameters=_LIST,
            data_filters=True,
        ),
        RoutePlugin(
            "read_data", get, f"{_RID}/data", handle_read_data, 40, "get", summary="Read data", response_body="model"
        ),
        RoutePlugin("read_meta", get, f"{_RID}/meta", handle_read_meta, 40, "get", summary="Read metadata"),
        RoutePlugin(
            "read_full",
            get,
            f"{_RID}/full",
            handle_read_full,
            40,
            "get",
            summary="Read data and metadata",
            response_body="full_any_shape",
            query_parameters=("shape",),
        ),
        RoutePlugin(
            "revision_list",
            get,
            f"{_RID}/revision-list",
            handle_revision_list,
            40,
            "get",
            summary="List revisions",
            response_body="list_revisions",
            query_parameters=("page", "page_size"),
        ),
        RoutePlugin(
            "switch",
            HTTPMethod.POST,
            f"{_RID}/switch/{{revision_id}}",
            handle_switch,
            40,
            upd,
            summary="Switch to a revision",
        ),
        RoutePlugin(
            "restore",
            HTTPMethod.POST,
            f"{_RID}/restore",
            handle_restore,
            40,
            upd,
            summary="Restore",
            query_parameters=("is_deleted",),
            description=_RESTORE_HELP,
        ),
        RoutePlugin(
            "get", get, _RID, handle_read_data, 50, "get", summary="Read (earlier route set)", response_body="model"
        ),
        RoutePlugin(
            "update",
            HTTPMethod.PUT,
            _RID,
            handle_update,
            50,
            upd,
            summary="Replace",
            request_body="model",
            description=_NO_OP_WRITE_HELP,
        ),
        RoutePlugin(
            "patch",
            HTTPMethod.PATCH,
            _RID,
            handle_patch,
            50,
            upd,
            summary="JSON Patch",
            request_body="json_patch",
            description=_NO_OP_WRITE_HELP,
        ),
        RoutePlugin("delete", HTTPMethod.DELETE, _RID, handle_delete, 50, "delete", summary="Soft delete"),
    ]


class PluginManager:
    """Holds route plugins; a plugin registered under an existing name replaces it."""

    def __init__(self, include_defaults: bool = True) -> None:
        self._plugins: dict[str, tuple[Any, bool]] = {}
        if include_defaults:
            for plugin in default_plugins():
                self.register_plugin(plugin, is_default=True)

    def register_plugin(self, plugin: Any, is_default: bool = False) -> None:
        """`plugin` has `name` and `get_routes(crud) -> list[PluginRouteConfig]` (a RoutePlugin, or your own)."""
        self._plugins[plugin.name] = (plugin, is_default)

    def add_route(self, route: PluginRouteConfig) -> None:
        """Register one custom route without writing a plugin class."""
        self.register_plugin(_SingleRoute(route))

    def unregister_plugin(self, name: str) -> None:
        self._plugins.pop(name, None)

    @property
    def plugins(self) -> list[tuple[Any, bool]]:
        return list(self._plugins.values())

    def get_route_configs(self, crud: SingleModelCRUD) -> list[ResolvedRoute]:
        """Routes ordered by priority; for one path and method a non-default or lower-numbered route wins."""
        chosen: dict[tuple[str, str], ResolvedRoute] = {}
        for plugin, is_default in self._plugins.values():
            for route in plugin.get_routes(crud):
                resolved = ResolvedRoute(route, getattr(plugin, "route_key", None), is_default)
                key = (route.path, HTTPMethod(route.method).value)
                held = chosen.get(key)
                if held is None or (is_default, route.priority) < (held.is_default, held.config.priority):
                    chosen[key] = resolved
        return sorted(chosen.values(), key=lambda r: (r.config.priority, r.config.path, r.config.method))


@dataclass
class _SingleRoute:
    route: PluginRouteConfig

    @property
    def name(self) -> str:
        return self.route.name

    def get_routes(self, crud: SingleModelCRUD) -> list[PluginRouteConfig]:
        return [self.route]


plugin_manager = PluginManager()
