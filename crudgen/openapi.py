"""drf-spectacular schema for generated routes: each operation is built from its route and model schema.

Schemas are written as JSON Schema 2020-12 (what msgspec emits and OpenAPI 3.1 uses) and put in
the dialect of the document's `OAS_VERSION` by `crudgen.jsonschema.for_openapi`, so the document
is valid OpenAPI 3.0.3 (drf-spectacular's default, with `nullable`) or 3.1.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry, ResolvedComponent
from drf_spectacular.settings import spectacular_settings

from crudgen.filters import MAX_IN_VALUES
from crudgen.jsonschema import REF_TEMPLATE, for_openapi, model_components, nullable, request_body_schema
from crudgen.params import MAX_PAGE
from crudgen.parsers import route_parsers
from crudgen.types import SORTABLE_FIELDS

if TYPE_CHECKING:
    from crudgen.crud import SingleModelCRUD
    from crudgen.filters import FilterableField

_REF = REF_TEMPLATE
_TEXT = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}

_META_SCHEMA = {
    "type": "object",
    "properties": {
        "resource_id": _TEXT,
        "current_revision_id": _TEXT,
        "is_deleted": {"type": "boolean"},
        "schema_version": nullable(_TEXT),
        "created_time": _TIME,
        "updated_time": _TIME,
        "created_by": nullable(_TEXT),
        "updated_by": nullable(_TEXT),
    },
    "required": ["resource_id", "current_revision_id", "is_deleted"],
}
_REVISION_IDS = {
    "resource_id": _TEXT,
    "revision_id": _TEXT,
    "parent_revision_id": nullable(_TEXT),
    "schema_version": nullable(_TEXT),
}
_REVISION_SCHEMA = {
    "type": "object",
    "properties": {
        **_REVISION_IDS,
        "is_current": {"type": "boolean"},
        "created_time": _TIME,
        "created_by": nullable(_TEXT),
    },
    "required": ["resource_id", "revision_id"],
}
#: `revision_info` of `/full?shape=revision_info`: the current revision with the resource's times and users.
_CURRENT_REVISION_SCHEMA = {
    "type": "object",
    "properties": {
        **_REVISION_IDS,
        "created_time": _TIME,
        "updated_time": _TIME,
        "created_by": nullable(_TEXT),
        "updated_by": nullable(_TEXT),
        "is_deleted": {"type": "boolean"},
    },
    "required": ["resource_id", "revision_id", "parent_revision_id", "is_deleted"],
    "additionalProperties": False,
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
# The 412's body also names the revision that is current, so a client can re-read and retry.
_REVISION_CONFLICT_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "`revision_conflict`"},
        "detail": {"type": "string"},
        "current_revision_id": {"type": "string"},
    },
    "required": ["error", "detail", "current_revision_id"],
}
# A JSON Pointer (RFC 6901) naming a place in the data: empty (the whole document) or `/`-separated
# tokens in which `~` is only ever `~0` or `~1`.
_JSON_POINTER = {"type": "string", "pattern": "^(/([^~/]|~[01])*)*$"}


def _patch_operation(ops: list[str], member: str | None) -> dict[str, Any]:
    """One kind of JSON Patch operation (RFC 6902): `add`, `replace` and `test` carry a `value`,
    `move` and `copy` a `from`, `remove` neither."""
    properties: dict[str, Any] = {"op": {"type": "string", "enum": ops}, "path": _JSON_POINTER}
    if member is not None:
        properties[member] = _JSON_POINTER if member == "from" else {}
    return {"type": "object", "properties": properties, "required": list(properties)}


_PATCH_SCHEMA = {
    "type": "array",
    "items": {
        "oneOf": [
            _patch_operation(["add", "replace", "test"], "value"),
            _patch_operation(["remove"], None),
            _patch_operation(["move", "copy"], "from"),
        ]
    },
}
# Text in a query: no NUL character (refused, 422); one of several values (`in`, `range`,
# `created_by`) has no comma either, since the comma separates them.
_QUERY_TEXT = {"type": "string", "pattern": "^[^\\u0000]*$"}
_ITEM_TEXT = {"type": "string", "pattern": "^[^,\\u0000]*$"}
_QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "page": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
    "page_size": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20},
    "created_by": {"type": "array", "items": _ITEM_TEXT},
    "updated_by": {"type": "array", "items": _ITEM_TEXT},
    "created_time_start": {"type": "string", "format": "date-time"},
    "created_time_end": {"type": "string", "format": "date-time"},
    "updated_time_start": {"type": "string", "format": "date-time"},
    "updated_time_end": {"type": "string", "format": "date-time"},
    "sort_by": {"type": "string", "enum": list(SORTABLE_FIELDS)},
    "sort_order": {"type": "string", "enum": ["asc", "desc"], "default": "desc"},
    "is_deleted": {"type": "boolean"},
    "shape": {"type": "string", "enum": ["meta", "revision_info"], "default": "meta"},
}
# A route whose parameter takes less than the parameter's usual schema: restore's `is_deleted`
# states that the resource is deleted, so only `true` (or leaving it out) is taken.
_ROUTE_QUERY_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("restore", "is_deleted"): {"type": "boolean", "enum": [True]},
}
# The open side of a range (`priority__range=,5`), for a field whose values are not text.
_OPEN_SIDE = {"type": "string", "maxLength": 0}
_FILTER_VALUES: dict[str, dict[str, Any]] = {
    "str": _QUERY_TEXT,
    "int": {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
}
_FILTER_HELP = {
    "exact": "equal to",
    "in": "one of (repeat the parameter, or separate values with commas)",
    "range": (
        "between, inclusive: two values, low and high (repeated or `low,high`; in the comma form an empty side is open)"
    ),
    "contains": "containing (case-sensitive)",
    "isnull": "null (true) or not null (false)",
}
_ERRORS_BY_METHOD = {
    "GET": (404, 410, 422),
    "POST": (404, 410, 412, 422),
    "PUT": (404, 410, 412, 422),
    "PATCH": (404, 410, 412, 422),
    # Every route refuses a query parameter it does not declare (422).
    "DELETE": (404, 412, 422),
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object of exactly these properties, all present."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


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


def _component_name(resource_name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", resource_name) if part)


def _filter_parameter(name: str, field: FilterableField, lookup: str) -> dict[str, Any]:
    value = dict(_FILTER_VALUES[field.kind])
    if field.choices is not None:
        value["enum"] = list(field.choices)
    parameter: dict[str, Any] = {
        "name": name,
        "in": "query",
        "required": False,
        "description": f"`{field.name}` {_FILTER_HELP[lookup]}",
    }
    if lookup == "isnull":
        parameter["schema"] = {"type": "boolean"}
    elif lookup in ("in", "range"):
        item = {**value, **_ITEM_TEXT} if value["type"] == "string" else value
        if lookup == "range" and value["type"] != "string":
            item = {"anyOf": [item, _OPEN_SIDE]}
        parameter["schema"] = {"type": "array", "items": item, "maxItems": MAX_IN_VALUES}
        if lookup == "range":
            parameter["schema"].update(minItems=2, maxItems=2)
        # Repeated keys (`form`, exploded: OpenAPI's default, which generated clients send); the
        # server takes the comma form as well.
        parameter.update(style="form", explode=True)
    else:
        parameter["schema"] = value
    return parameter


def data_filter_parameters(crud: SingleModelCRUD) -> list[dict[str, Any]]:
    """One query parameter per filter of the model's generated FilterSet."""
    return [
        _filter_parameter(name, crud.filterable_fields[spec.field_name], spec.lookup_expr)
        for name, spec in crud.filterset.base_filters.items()
    ]


class CrudAutoSchema(AutoSchema):
    """Describes a generated view from its bindings instead of serializers, which crudgen does not use."""

    def _register(self, registry: ComponentRegistry, name: str, schema: dict[str, Any]) -> None:
        registry.register_on_missing(
            ResolvedComponent(
                name=name,
                type=ResolvedComponent.SCHEMA,
                # A copy: drf-spectacular's hooks rewrite components in place (its enum naming turns
                # an `enum` into a reference), and the constants serve every document made here.
                schema=for_openapi(copy.deepcopy(schema), spectacular_settings.OAS_VERSION),
                object=name,
            )
        )

    def _model_schema(self, registry: ComponentRegistry, crud: SingleModelCRUD) -> tuple[dict[str, Any], str | None]:
        """(the model's schema, the name of its create/replace body component, if it has one)."""
        schema, components = model_components(crud.model)
        for name, component in components.items():
            self._register(registry, name, component)
        model_name = schema.get("$ref", "").rpartition("/")[2]
        if model_name not in components:
            return schema, None
        body_name = f"{_component_name(crud.resource_name)}Request"
        optional = {*crud.metadata_config.get_metadata_fields(), *crud.adapter.default_values}
        rules = crud.access_policy.data_field_schemas
        self._register(registry, body_name, request_body_schema(components[model_name], optional, body_name, rules))
        return schema, body_name

    def _body(self, kind: Any, model_schema: dict[str, Any], body_name: str | None) -> dict[str, Any]:
        meta, revision = _ref("CrudResourceMeta"), _ref("CrudRevisionInfo")
        full = _closed({"data": model_schema, "meta": meta})
        kinds: dict[str, dict[str, Any]] = {
            "meta": meta,
            "model": model_schema,
            "request": _ref(body_name) if body_name else model_schema,
            "json_patch": _ref("CrudJsonPatch"),
            "full": full,
            "full_any_shape": {
                "oneOf": [full, _closed({"data": model_schema, "revision_info": _ref("CrudCurrentRevision")})]
            },
            "list_data": _page_of(model_schema),
            "list_meta": _page_of(meta),
            "list_full": _page_of(full),
            "list_revisions": _page_of(revision),
            "count": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        }
        if isinstance(kind, str) and kind in kinds:
            return kinds[kind]
        return {"type": "object"}

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: ComponentRegistry
    ) -> dict[str, Any] | None:
        binding = self.view.bindings.get(method.upper())
        if binding is None:
            return None
        for name, schema in (
            ("CrudResourceMeta", _META_SCHEMA),
            ("CrudRevisionInfo", _REVISION_SCHEMA),
            ("CrudCurrentRevision", _CURRENT_REVISION_SCHEMA),
            ("CrudError", _ERROR_SCHEMA),
            ("CrudRevisionConflict", _REVISION_CONFLICT_SCHEMA),
            ("CrudJsonPatch", _PATCH_SCHEMA),
        ):
            self._register(registry, name, schema)
        route, crud = binding.route.config, binding.crud
        model_schema, body_name = self._model_schema(registry, crud)
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"{(\w+)}", path)
        ]
        parameters += [
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": _ROUTE_QUERY_SCHEMAS.get((route.name, name)) or _QUERY_SCHEMAS.get(name, _QUERY_TEXT),
            }
            for name in route.query_parameters
        ]
        if route.data_filters:
            parameters += data_filter_parameters(crud)
        # A write to an existing resource is refused (412) unless it is still at the revision named;
        # a create has no revision to compare with.
        honours_if_match = method.upper() in {"PUT", "PATCH", "POST", "DELETE"} and "{resource_id}" in path
        if honours_if_match:
            parameters.append(
                {
                    "name": "If-Match",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": 'the current revision id as an entity tag (`"<revision id>"`), else 412',
                }
            )
        response_schema = for_openapi(
            self._body(route.response_model or "meta", model_schema, body_name), spectacular_settings.OAS_VERSION
        )
        success = {"description": "OK", "content": {"application/json": {"schema": response_schema}}}
        if route.name in {"read_data", "read_meta", "read_full", "get"} or route.response_model == "meta":
            success["headers"] = {"ETag": {"schema": {"type": "string"}, "description": "current revision id"}}
        if route.name == "create":
            success["headers"] = {
                **success.get("headers", {}),
                "Location": {"schema": {"type": "string"}, "description": "the new resource's address"},
            }
        responses: dict[str, Any] = {str(binding.status_code): success}
        codes = [code for code in _ERRORS_BY_METHOD.get(method.upper(), ()) if code != 412 or honours_if_match]
        if route.name == "restore":
            codes.append(409)
        if method.upper() in {"POST", "PUT", "PATCH"}:
            codes += crud.access_policy.data_refusal_statuses
        for code in sorted(set(codes)):
            body = "CrudRevisionConflict" if code == 412 else "CrudError"
            responses[str(code)] = {"description": "error", "content": {"application/json": {"schema": _ref(body)}}}
        if route.data_filters:
            # Long value lists make long URLs; the HTTP server refuses a request line past its limit
            # (gunicorn: 4094 bytes) before the application sees it, in its own words.
            responses["414"] = {"description": "URI too long for the HTTP server in front of the application."}
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
            kind = "request" if route.request_model == "model" else route.request_model
            body_schema = self._body(kind, model_schema, body_name)
            content = {parser.media_type: {"schema": body_schema} for parser in route_parsers(route.request_model)}
            operation["requestBody"] = {"required": True, "content": content}
        return operation
