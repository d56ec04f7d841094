"""How the OpenAPI schema describes the service's authentication and its shared error bodies."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

ERROR_COMPONENT = "ErrorOutput"
_ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error: an `error` code and a human `detail`; some codes add fields (`dimension`, `used`...).",
    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
    "required": ["error", "detail"],
}
# The bodies of a 507, by their `error` code (quotas/services.py, quotas/disk.py): a client branches
# on `error` and then reads the fields of that refusal.
SANDBOX_REFUSAL_COMPONENT = "SandboxQuotaRefusal"
DISK_REFUSAL_COMPONENT = "DiskQuotaRefusal"
_SANDBOX_REFUSAL_SCHEMA = {
    "type": "object",
    "description": "Opening a sandbox would take its payer over a limit; `also` lists the other limits that bind.",
    "properties": {
        "error": {"type": "string", "enum": ["sandbox_quota_exceeded"]},
        "detail": {"type": "string"},
        "dimension": {"type": "string", "enum": ["sandboxes", "cpu", "memory"]},
        "used": {"type": "number", "description": "In use now: sandboxes, cores or bytes, by `dimension`."},
        "limit": {"type": "number"},
        "requested": {"type": "number", "description": "What this sandbox would add."},
        "owner": {"type": "string", "description": "Whose limit it is (the payer)."},
        "also": {"type": "array", "items": {"$ref": f"#/components/schemas/{SANDBOX_REFUSAL_COMPONENT}"}},
    },
    "required": ["error", "detail", "dimension", "used", "limit", "requested"],
}
_DISK_REFUSAL_SCHEMA = {
    "type": "object",
    "description": "A write would take a workspace over its limit, or its payer over their disk total (bytes).",
    "properties": {
        "error": {"type": "string", "enum": ["workspace_quota_exceeded", "user_quota_exceeded"]},
        "detail": {"type": "string"},
        "dimension": {"type": "string", "enum": ["disk"]},
        "used": {"type": "integer"},
        "quota": {"type": "integer"},
        "attempted": {"type": "integer", "description": "Where the write would have brought `used`."},
        "also": {"type": "array", "items": {"$ref": f"#/components/schemas/{DISK_REFUSAL_COMPONENT}"}},
    },
    "required": ["error", "detail", "dimension", "used", "quota", "attempted"],
}
_WRITE_METHODS = {"post", "put", "patch", "delete"}
_METHODS = {"get", "post", "put", "patch", "delete"}


# What DRF's CharField refuses in a request: a NUL character always, and, unless `allow_blank`, a
# value with nothing but whitespace (it trims the value first).
_NO_NUL = "^[^\\u0000]*$"
_NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


def _input_rules(field: Any, schema: dict[str, Any]) -> None:
    """Adds to a request field's schema the rules DRF enforces that drf-spectacular leaves out."""
    if isinstance(field, serializers.CharField) and schema.get("type") == "string" and "pattern" not in schema:
        if field.allow_blank:
            schema["pattern"] = _NO_NUL
        else:
            schema["minLength"] = max(schema.get("minLength", 0), 1)
            schema["pattern"] = _NOT_BLANK if field.trim_whitespace else _NO_NUL
    elif (
        isinstance(field, serializers.ListField | serializers.ListSerializer | serializers.ManyRelatedField)
        and not field.allow_empty
        and schema.get("type") == "array"
    ):
        schema["minItems"] = max(schema.get("minItems", 0), 1)


class WorkspaceAutoSchema(AutoSchema):
    """drf-spectacular's schema, with every rule the serializers enforce on a request in the document."""

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema = super()._map_basic_serializer(serializer, direction)
        # A serializer that refuses a field it does not declare (400) says so: `unknown_fields_refused`.
        if direction == "request" and getattr(serializer, "unknown_fields_refused", False):
            schema["additionalProperties"] = False
        return schema

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(schema, dict):
            _input_rules(field, schema)
        return schema


class WorkspaceAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "collab.authentication.WorkspaceAuthentication"
    name = ["bearerAuth", "tokenAuth", "cookieAuth", "basicAuth", "mockUserHeader"]

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list[Any]]]:
        # Alternatives, not a conjunction: any one of them identifies the caller.
        return [{name: []} for name in self.name]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        return [
            {
                "type": "http",
                "scheme": "bearer",
                "description": "A personal API token (`/me/tokens`): `Authorization: Bearer <token>`.",
            },
            {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": "The same token as `Authorization: Token <token>`.",
            },
            {
                "type": "apiKey",
                "in": "cookie",
                "name": "sessionid",
                "description": "A signed-in browser; its writes need the CSRF token (`X-CSRFToken`).",
            },
            {
                "type": "http",
                "scheme": "basic",
                "description": "Username and password, for scripts; no answer ever asks for it, and a write from "
                "another site's page is refused.",
            },
            {
                "type": "apiKey",
                "in": "header",
                "name": "X-User-Id",
                "description": "Mock identity only (demo and tests): names the acting user.",
            },
        ]


def lib_doc_excludes() -> list[type]:
    """drf-spectacular's GET_LIB_DOC_EXCLUDES: its own list and `ServiceApiView`, whose docstring
    (about parsing) otherwise became the description of every view that has none of its own."""
    # Imported here, as drf-spectacular's own default does, so loading the settings imports no view.
    from drf_spectacular.plumbing import get_lib_doc_excludes

    from collab.api import ServiceApiView

    return [*get_lib_doc_excludes(), ServiceApiView]


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}}},
    }


_QUOTA_REFUSAL = {
    "oneOf": [
        {"$ref": f"#/components/schemas/{SANDBOX_REFUSAL_COMPONENT}"},
        {"$ref": f"#/components/schemas/{DISK_REFUSAL_COMPONENT}"},
    ],
    "discriminator": {
        "propertyName": "error",
        "mapping": {
            "sandbox_quota_exceeded": f"#/components/schemas/{SANDBOX_REFUSAL_COMPONENT}",
            "workspace_quota_exceeded": f"#/components/schemas/{DISK_REFUSAL_COMPONENT}",
            "user_quota_exceeded": f"#/components/schemas/{DISK_REFUSAL_COMPONENT}",
        },
    },
}
_WWW_AUTHENTICATE = {
    "WWW-Authenticate": {
        "schema": {"type": "string"},
        "description": 'The challenge: `Bearer realm="workspace"` (with `error="invalid_token"` for a bad token).',
    }
}
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before trying again."}}


def _shared_errors(path: str, method: str, operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The errors any operation of this shape can answer, whatever its view declares."""
    errors = {
        "401": _error_response("Unknown X-User-Id, bad credentials or nobody signed in."),
        "429": _error_response("Too many failed sign-ins from here or for this account (`too_many_attempts`)."),
        "503": _error_response("The database (or a backend it needs) cannot be reached right now."),
    }
    if "{" in path:
        errors["404"] = _error_response("Not found, or not yours.")
    if method in _WRITE_METHODS:
        errors["400"] = _error_response("Malformed request (`malformed_request`) or invalid fields.")
        errors["403"] = _error_response(
            "A browser's write without the page's CSRF token, or a write from another site (`csrf_failed`)."
        )
    if "requestBody" in operation:
        errors["415"] = _error_response("The body's media type is not accepted.")
    return errors


# What a nullable reference allows besides its component: null. OpenAPI 3.0 has no null type, and
# `nullable` counts only beside a `type` (the 3.0.3 clarification), so drf-spectacular's
# `allOf: [ref], nullable: true` lets a strict validator refuse a real null.
_NULL_ONLY = {"type": "object", "nullable": True, "enum": [None]}


def _nullable_references(node: Any) -> None:
    """Rewrites each `{allOf: [ref], nullable: true}` under `node` as `{anyOf: [ref, null]}`."""
    if isinstance(node, list):
        for member in node:
            _nullable_references(member)
        return
    if not isinstance(node, dict):
        return
    members = node.get("allOf")
    if node.get("nullable") is True and isinstance(members, list) and len(members) == 1 and "$ref" in members[0]:
        del node["allOf"], node["nullable"]
        node["anyOf"] = [members[0], copy.deepcopy(_NULL_ONLY)]
    for value in node.values():
        _nullable_references(value)


def nullable_references(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: nullable references a strict OpenAPI 3.0 validator takes."""
    _nullable_references(result.get("components", {}).get("schemas", {}))
    return result


def add_shared_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: one error component, listed under every operation.

    Views declare their own domain errors (403, 507...); the ones the middleware, the parsers and
    the URL resolver produce everywhere are added here so no operation leaves them undocumented.
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    # Copies: a later hook (drf-spectacular's enum naming, in another document) rewrites what it is
    # given in place, and these constants serve every document generated in the process.
    schemas.setdefault(ERROR_COMPONENT, copy.deepcopy(_ERROR_SCHEMA))
    schemas.setdefault(SANDBOX_REFUSAL_COMPONENT, copy.deepcopy(_SANDBOX_REFUSAL_SCHEMA))
    schemas.setdefault(DISK_REFUSAL_COMPONENT, copy.deepcopy(_DISK_REFUSAL_SCHEMA))
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for code, response in _shared_errors(path, method, operation).items():
                responses.setdefault(code, response)
            for code in ("429", "503"):
                if code in responses:
                    responses[code].setdefault("headers", {}).update(_RETRY_AFTER)
            responses["401"].setdefault("headers", {}).update(_WWW_AUTHENTICATE)
            if "507" in responses:
                responses["507"] = {
                    "description": "Over a quota: the body says which limit, by its `error` code.",
                    "content": {"application/json": {"schema": copy.deepcopy(_QUOTA_REFUSAL)}},
                }
    return result


def readable_tags(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: operations grouped under names a reader knows.

    drf-spectacular tags an operation with its path's first segment, which for the items' routes is
    the bare "a" of `/a/{slug}/items`; WORKSPACE_API_TAG_NAMES renames such tags, and the document
    lists its tags in that mapping's order first, the others after them.
    """
    from django.conf import settings

    names: dict[str, str] = settings.WORKSPACE_API_TAG_NAMES
    seen: list[str] = []
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            operation["tags"] = [names.get(tag, tag) for tag in operation.get("tags", [])]
            seen.extend(tag for tag in operation["tags"] if tag not in seen)
    first = [name for name in names.values() if name in seen]
    result["tags"] = [{"name": name} for name in first + sorted(set(seen) - set(first))]
    return result
