"""DRF views generated from resolved routes: one APIView class per path, one handler per method."""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponseBase
from django.urls import URLPattern, path
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from crudgen.errors import CrudError, ValidationFailed
from crudgen.parsers import route_parsers
from crudgen.plugins import PluginManager, ResolvedRoute, RouteContext
from crudgen.types import BackgroundTaskMode, Dependency, HTTPMethod, RouteConfig, RouteOptions

if TYPE_CHECKING:
    from crudgen.crud import SingleModelCRUD

logger = logging.getLogger(__name__)

_PLACEHOLDER = re.compile(r"{(\w+)}")

# DRF's exceptions and the error codes a body names them by (the service's edge uses the same).
ERROR_CODES_BY_CLASS: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ParseError, "malformed_request"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.NotAuthenticated, "not_authenticated"),
    (exceptions.AuthenticationFailed, "invalid_credentials"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.Throttled, "throttled"),
]


class CrudResponse(Response):
    """A response that runs its background tasks once the server has sent it (WSGI `close`)."""

    def __init__(self, *args: Any, after_send: Sequence[Callable[[], Any]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after_send = list(after_send)

    def close(self) -> None:
        super().close()
        for task in self.after_send:
            try:
                task()
            except Exception:
                # The client already has its answer; a failing task must not turn into a 500 now.
                logger.exception("crudgen background task failed")


@dataclass(frozen=True)
class RouteBinding:
    """A resolved route with the options that apply to it (from RouteConfig or the plugin's own)."""

    crud: SingleModelCRUD
    route: ResolvedRoute
    options: RouteOptions

    @property
    def status_code(self) -> int:
        return self.options.custom_status_code or self.route.config.status_code

    @property
    def dependencies(self) -> list[Dependency]:
        return [*(self.route.config.dependencies or ()), *(self.options.custom_dependencies or ())]


def error_response(exc: Exception) -> Response | None:
    """crudgen's own error bodies, so its routes never depend on the host project's exception handler."""
    if isinstance(exc, CrudError):
        return Response(exc.body(), status=exc.status_code)
    if isinstance(exc, DataError):
        # The database refused a value Python accepted (PostgreSQL: a NUL character); nothing was stored.
        return Response(
            {"error": "validation_error", "detail": "A value cannot be stored (e.g. a NUL character)."}, status=422
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None
    response = Response({"error": _error_code(exc), "detail": str(exc.detail)}, status=exc.status_code)
    if isinstance(exc, exceptions.MethodNotAllowed | exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        response.status_code = exc.status_code
    return response


def _error_code(exc: exceptions.APIException) -> str:
    """DRF's own exceptions by crudgen's names; any other keeps the code it was raised with (a host
    project's authentication refusing a request, say), so no body says only `error`."""
    named = next((name for cls, name in ERROR_CODES_BY_CLASS if isinstance(exc, cls)), None)
    if named is not None:
        return named
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else exc.default_code


def _schema() -> Any:
    """crudgen's drf-spectacular schema where drf-spectacular is installed (the `openapi` extra);
    without it the views have no schema and everything else works."""
    if importlib.util.find_spec("drf_spectacular") is None:
        return None
    from crudgen.openapi import CrudAutoSchema

    return CrudAutoSchema()


class CrudView(APIView):
    """Base of every generated view; subclasses carry `bindings` (HTTP method to RouteBinding)."""

    bindings: dict[str, RouteBinding] = {}
    renderer_classes = [JSONRenderer]
    schema = _schema()

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        """Each method parses only the media types its route's schema advertises (`route_parsers`)."""
        drf_request = super().initialize_request(request, *args, **kwargs)
        binding = self.bindings.get(request.method or "")
        model = binding.route.config.request_model if binding is not None else None
        drf_request.parsers = [parser() for parser in route_parsers(model)]
        return drf_request

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            header = self.get_authenticate_header(self.request)
            if header:
                exc.auth_header = header  # type: ignore[attr-defined]
            else:
                exc.status_code = 403
        response = error_response(exc)
        if response is None:
            raise exc
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            response["WWW-Authenticate"] = auth_header
        if isinstance(exc, exceptions.MethodNotAllowed):
            response["Allow"] = ", ".join(self.allowed_methods)
        response.exception = True
        return response

    def _current_user(self, binding: RouteBinding, request: Request) -> str | None:
        getter = binding.crud.metadata_config.get_current_user
        if getter is not None:
            return getter()
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            return None
        return str(user.get_username()) if hasattr(user, "get_username") else str(user)

    def _check_dependencies(self, binding: RouteBinding, request: Request) -> None:
        for dependency in binding.dependencies:
            if isinstance(dependency, type):
                permission = dependency()
                if not permission.has_permission(request, self):
                    self.permission_denied(request, message=getattr(permission, "message", None))
            elif dependency(request) is False:
                raise exceptions.PermissionDenied()

    def _serve(self, request: Request, **kwargs: Any) -> HttpResponseBase:
        # HEAD is a GET whose body is not sent (Django drops it); a route without GET has no HEAD.
        binding = self.bindings["GET" if request.method == "HEAD" else request.method]
        self._check_dependencies(binding, request)
        _refuse_unknown_parameters(binding, request.query_params)
        ctx = RouteContext(request, binding.crud, kwargs, self._current_user(binding, request))
        result = binding.route.config.handler(ctx)
        if isinstance(result, HttpResponseBase):
            return result
        tasks = self._background_tasks(binding, result)
        response = CrudResponse(result, status=binding.status_code, after_send=tasks)
        if ctx.etag:
            response["ETag"] = f'"{ctx.etag}"'
        for name, value in ctx.headers.items():
            response[name] = value
        return response

    @staticmethod
    def _background_tasks(binding: RouteBinding, result: Any) -> list[Callable[[], Any]]:
        options = binding.options
        if options.background_task != BackgroundTaskMode.ENABLED or options.background_task_func is None:
            return []
        condition = options.background_task_condition
        if condition is not None and not condition(result):
            return []
        func = options.background_task_func
        return [lambda: func(result)]


# How many unknown parameters a 422 names, and how much of each name: the answer to a query of a
# thousand made-up keys stays small.
_UNKNOWN_NAMED = 20
_NAME_SHOWN = 100


def _refuse_unknown_parameters(binding: RouteBinding, query: Any) -> None:
    """A query parameter the route does not declare is a 422 naming it: ignored, a typo (`sort=`
    for `sort_by=`, a filter on a field that has none) would answer as if nothing were asked."""
    route = binding.route.config
    accepted = {*route.query_parameters, api_settings.URL_FORMAT_OVERRIDE}
    if route.data_filters:
        accepted.update(binding.crud.filterset.base_filters)
    unknown = sorted(name for name in query if name not in accepted)
    if unknown:
        named = [name[:_NAME_SHOWN] for name in unknown[:_UNKNOWN_NAMED]]
        more = f" and {len(unknown) - len(named)} more" if len(unknown) > len(named) else ""
        offered = ", ".join(sorted(name for name in accepted if name)) or "none"
        raise ValidationFailed(
            {name: "is not a parameter of this route" for name in named},
            detail=f"Not parameters of this route: {', '.join(named)}{more}. It takes: {offered}.",
        )


def _view_for(path_key: str, bindings: dict[str, RouteBinding]) -> type[CrudView]:
    handlers = {method.lower(): CrudView._serve for method in bindings}
    name = "Crud" + re.sub(r"\W+", "_", path_key).title().replace("_", "") + "View"
    return type(name, (CrudView,), {"bindings": bindings, **handlers})


def _options_for(route: ResolvedRoute, route_config: RouteConfig) -> RouteOptions:
    if route.route_key is not None:
        return route_config.options_for(route.route_key)
    if route.config.name in {"create", "get", "update", "delete", "list", "count"}:
        return route_config.options_for(route.config.name)
    return route.config.options


def django_path(template: str) -> str:
    return _PLACEHOLDER.sub(r"<str:\1>", template)


def crud_urlpatterns(
    crud: SingleModelCRUD, prefix: str, route_config: RouteConfig, manager: PluginManager
) -> list[URLPattern]:
    """URL patterns of one model; a path none of whose methods is enabled is left out (404)."""
    by_path: dict[str, dict[str, RouteBinding]] = {}
    order: list[str] = []
    for route in manager.get_route_configs(crud):
        options = _options_for(route, route_config)
        if not options.enabled:
            continue
        full = f"{prefix}{crud.resource_name}{route.config.path}"
        if full not in by_path:
            by_path[full] = {}
            order.append(full)
        by_path[full][HTTPMethod(route.config.method).value] = RouteBinding(crud, route, options)
    # Paths without parameters first: `/<m>/count` must not be taken for a resource id.
    order.sort(key=lambda key: "{" in key)
    return [path(django_path(key), _view_for(key, by_path[key]).as_view(), name=_url_name(key)) for key in order]


def _url_name(key: str) -> str:
    return "crudgen-" + re.sub(r"[{}]", "", key).strip("/").replace("/", "-")
