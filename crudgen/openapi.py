"""drf-spectacular schema for generated routes: each operation is built from its route and model schema."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry, ResolvedComponent

from crudgen.schema import is_supported_model
from crudgen.types import SORTABLE_FIELDS

_REF = "#/components/schemas/{name}"

_META_SCHEMA = {
    "type": "object",
    "properties": {
        "resource_id": {"type": "string", "format": "uuid"},
        "current_revision_id": {"type": "string"},
        "is_deleted": {"type": "boolean"},
        "schema_version": {"type": "string", "nullable": True},
        "created_time": {"type": "string", "format": "date-time"},
        "updated_time": {"type": "string", "format": "date-time"},
        "created_by": {"type": "string", "nullable": True},
        "updated_by": {"type": "string", "nullable": True},
    },
    "required": ["resource_id", "current_revision_id", "is_deleted"],
}
_REVISION_SCHEMA = {
    "type": "object",
    "properties": {
        "resource_id": {"type": "string"},
        "revision_id": {"type": "string"},
        "parent_revision_id": {"type": "string", "nullable": True},
        "schema_version": {"type": "string", "nullable": True},
        "is_current": {"type": "boolean"},
        "created_time": {"type": "string", "format": "date-time"},
        "created_by": {"type": "string", "nullable": True},
    },
    "required": ["resource_id", "revision_id"],
}
_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "detail": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["error", "detail"],
}
_PATCH_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
            "path": {"type": "string"},
            "from": {"type": "string"},
            "value": {},
        },
        "required": ["op", "path"],
    },
}
_QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "page": {"type": "integer", "minimum": 1, "default": 1},
    "page_size": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20},
    "created_by": {"type": "array", "items": {"type": "string"}},
    "updated_by": {"type": "array", "items": {"type": "string"}},
    "created_time_start": {"type": "string", "format": "date-time"},
    "created_time_end": {"type": "string", "format": "date-time"},
    "updated_time_start": {"type": "string", "format": "date-time"},
    "updated_time_end": {"type": "string", "format": "date-time"},
    "sort_by": {"type": "string", "enum": list(SORTABLE_FIELDS)},
    "sort_order": {"type": "string", "enum": ["asc", "desc"], "default": "desc"},
    "is_deleted": {"type": "boolean"},
    "shape": {"type": "string", "enum": ["meta", "revision_info"], "default": "meta"},
}
_ERRORS_BY_METHOD = {
    "GET": (404, 410, 422),
    "POST": (404, 410, 412, 422),
    "PUT": (404, 410, 412, 422),
    "PATCH": (404, 410, 412, 422),
    "DELETE": (404, 412),
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _page_of(items: dict[str, Any]) -> dict[str, Any]:
    counters = {name: {"type": "integer"} for name in ("total", "page", "page_size", "total_pages")}
    return {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": items},
            **counters,
            "has_next": {"type": "boolean"},
            "has_prev": {"type": "boolean"},
        },
        "required": ["items", *counters, "has_next", "has_prev"],
    }


class CrudAutoSchema(AutoSchema):
    """Describes a generated view from its bindings instead of serializers, which crudgen does not use."""

    def _register(self, registry: ComponentRegistry, name: str, schema: dict[str, Any]) -> None:
        registry.register_on_missing(
            ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name)
        )

    def _model_schema(self, registry: ComponentRegistry, model: Any) -> dict[str, Any]:
        if not is_supported_model(model):
            return {"type": "object"}
        from msgspec.json import schema_components

        (schema,), components = schema_components([model], ref_template=_REF)
        for name, component in components.items():
            self._register(registry, name, component)
        return schema

    def _body(self, kind: Any, model_schema: dict[str, Any], registry: ComponentRegistry) -> dict[str, Any]:
        meta, revision = _ref("CrudResourceMeta"), _ref("CrudRevisionInfo")
        full = {"type": "object", "properties": {"data": model_schema, "meta": meta}, "required": ["data"]}
        kinds: dict[str, dict[str, Any]] = {
            "meta": meta,
            "model": model_schema,
            "json_patch": _ref("CrudJsonPatch"),
            "full": full,
            "list_data": _page_of(model_schema),
            "list_meta": _page_of(meta),
            "list_full": _page_of(full),
            "list_revisions": _page_of(revision),
            "count": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        }
        if isinstance(kind, str) and kind in kinds:
            return kinds[kind]
        return self._model_schema(registry, kind)

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: ComponentRegistry
    ) -> dict[str, Any] | None:
        binding = self.view.bindings.get(method.upper())
        if binding is None:
            return None
        for name, schema in (
            ("CrudResourceMeta", _META_SCHEMA),
            ("CrudRevisionInfo", _REVISION_SCHEMA),
            ("CrudError", _ERROR_SCHEMA),
            ("CrudJsonPatch", _PATCH_SCHEMA),
        ):
            self._register(registry, name, schema)
        route, crud = binding.route.config, binding.crud
        model_schema = self._model_schema(registry, crud.model)
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"{(\w+)}", path)
        ]
        parameters += [
            {"name": name, "in": "query", "required": False, "schema": _QUERY_SCHEMAS.get(name, {"type": "string"})}
            for name in route.query_parameters
        ]
        if method.upper() in {"PUT", "PATCH", "POST", "DELETE"}:
            parameters.append({"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"}})
        success = {
            "description": "OK",
            "content": {
                "application/json": {"schema": self._body(route.response_model or "meta", model_schema, registry)}
            },
        }
        if route.name in {"read_data", "read_meta", "read_full", "get"} or route.response_model == "meta":
            success["headers"] = {"ETag": {"schema": {"type": "string"}, "description": "current revision id"}}
        responses: dict[str, Any] = {str(binding.status_code): success}
        codes = list(_ERRORS_BY_METHOD.get(method.upper(), ()))
        if method.upper() in {"POST", "PUT", "PATCH"}:
            codes += crud.access_policy.data_refusal_statuses
        for code in sorted(set(codes)):
            responses[str(code)] = {
                "description": "error",
                "content": {"application/json": {"schema": _ref("CrudError")}},
            }
        operation: dict[str, Any] = {
            "operationId": re.sub(r"\W+", "_", f"{crud.resource_name}_{route.name}"),
            "tags": route.tags or [crud.resource_name],
            "parameters": parameters,
            "responses": responses,
        }
        if route.summary:
            operation["summary"] = route.summary
        if route.description:
            operation["description"] = route.description
        if route.request_model is not None:
            media = "application/json-patch+json" if route.request_model == "json_patch" else "application/json"
            body_schema = self._body(route.request_model, model_schema, registry)
            operation["requestBody"] = {"required": True, "content": {media: {"schema": body_schema}}}
        return operation
