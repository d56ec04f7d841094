"""JSON Schema of registered models, and its OpenAPI 3.0 form (no drf-spectacular needed).

msgspec writes JSON Schema 2020-12, which is what OpenAPI 3.1 uses. OpenAPI 3.0 has its own
dialect: no `type: null` (a `nullable` flag instead), no `const`, no `prefixItems`, boolean
`exclusiveMinimum`, `format: byte` for base64, `example` instead of `examples`, and nothing beside
a `$ref`. `for_openapi` rewrites a schema into the dialect of the document's version.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

from crudgen.schema import is_supported_model

REF_TEMPLATE = "#/components/schemas/{name}"
_NULL = {"type": "null"}


def model_components(model: type) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(schema of the model, its components), every object of them closed (`additionalProperties:
    false`): crudgen refuses unknown fields at any depth, so the schema says so."""
    from msgspec.json import schema_components

    if not is_supported_model(model):
        return {"type": "object"}, {}
    (schema,), components = schema_components([model], ref_template=REF_TEMPLATE)
    for component in components.values():
        if component.get("type") == "object" and "properties" in component:
            component.setdefault("additionalProperties", False)
        _type_enums(component)
    return schema, components


def _type_enums(node: Any) -> None:
    """msgspec leaves `type` off enums (Enum classes and Literals); tools that read enums want it."""
    if isinstance(node, list):
        for item in node:
            _type_enums(item)
        return
    if not isinstance(node, dict):
        return
    values = node.get("enum")
    if isinstance(values, list) and "type" not in node:
        kinds = {"string" if isinstance(v, str) else "integer" if isinstance(v, int) else None for v in values}
        if len(kinds) == 1 and None not in kinds:
            node["type"] = kinds.pop()
    for key in (*_SUBSCHEMA, *_SUBSCHEMA_LISTS):
        _type_enums(node.get(key))
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            _type_enums(list(node[key].values()))


def request_body_schema(
    model_component: Mapping[str, Any],
    optional: Collection[str],
    title: str,
    field_rules: Mapping[str, Mapping[str, Any]] = MappingProxyType({}),
) -> dict[str, Any]:
    """A create or replace body: the model's object with the fields the server fills (or defaults)
    no longer required, and each of `field_rules` merged over its field's schema."""
    body = {**model_component, "title": title}
    properties = {name: _without_nul(schema) for name, schema in body.get("properties", {}).items()}
    for name, rules in field_rules.items():
        if name in properties:
            properties[name] = {**properties[name], **rules}
    if properties:
        body["properties"] = properties
    required = [name for name in model_component.get("required", []) if name not in optional]
    if required:
        body["required"] = required
    else:
        body.pop("required", None)
    return body


#: Text the server stores: no NUL character (`crudgen.schema` refuses it on every storage).
NO_NUL_PATTERN = "^[^\\u0000]*$"


def _without_nul(schema: Any) -> Any:
    """`schema` with each string it holds inline (not behind a reference) refusing NUL characters."""
    if isinstance(schema, list):
        return [_without_nul(member) for member in schema]
    if not isinstance(schema, Mapping):
        return schema
    found = {
        key: _without_nul(value) if key in ("items", "anyOf", "oneOf", "allOf", "prefixItems") else value
        for key, value in schema.items()
    }
    if found.get("type") == "string" and "pattern" not in found and "enum" not in found:
        found["pattern"] = NO_NUL_PATTERN
    return found


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null, in 2020-12 terms (`for_openapi` turns it into `nullable` for 3.0)."""
    return {"anyOf": [schema, dict(_NULL)]}


def for_openapi(schema: Any, oas_version: str) -> Any:
    """`schema` (JSON Schema 2020-12) in the dialect of an OpenAPI document of `oas_version`."""
    if oas_version.startswith("3.0"):
        return _to_30(schema)
    return schema


_SUBSCHEMA = ("items", "additionalProperties", "not")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs")


def _to_30(node: Any) -> Any:
    """One schema, rewritten; only its subschemas are descended into (never `default` or `enum`
    values, nor a property that happens to be named like a keyword)."""
    if not isinstance(node, dict):
        return node
    for union in ("anyOf", "oneOf"):
        members = node.get(union)
        if isinstance(members, list) and _NULL in members:
            node = _without_null(node, union, [m for m in members if m != _NULL])
    node = dict(node)
    for key in _SUBSCHEMA:
        if isinstance(node.get(key), dict):
            node[key] = _to_30(node[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_to_30(member) for member in node[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {name: _to_30(member) for name, member in node[key].items()}
    if isinstance(node.get("type"), list):
        kinds = [kind for kind in node["type"] if kind != "null"]
        if len(kinds) < len(node["type"]):
            node["nullable"] = True
        node["type"] = kinds[0] if len(kinds) == 1 else kinds
        if isinstance(node["type"], list):
            node = {k: v for k, v in node.items() if k != "type"} | {"anyOf": [{"type": k} for k in kinds]}
    if node.get("type") == "null":
        node = {k: v for k, v in node.items() if k != "type"} | {"nullable": True, "enum": [None]}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "prefixItems" in node:
        node["items"] = {"anyOf": node.pop("prefixItems")}
    if node.get("items") is False:
        node.pop("items")
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), int | float) and not isinstance(node[bound], bool):
            node[plain] = node[bound]
            node[bound] = True
    if node.pop("contentEncoding", None) == "base64":
        node["format"] = "byte"
    node.pop("contentMediaType", None)
    if isinstance(node.get("examples"), list):
        examples = node.pop("examples")
        if examples:
            node["example"] = examples[0]
    if "$ref" in node and len(node) > 1:
        node = {"allOf": [{"$ref": node["$ref"]}]} | {k: v for k, v in node.items() if k != "$ref"}
    return node


def _without_null(node: dict[str, Any], union: str, rest: list[Any]) -> dict[str, Any]:
    siblings = {k: v for k, v in node.items() if k != union}
    if len(rest) != 1:
        return siblings | {union: rest, "nullable": True}
    (member,) = rest
    if "$ref" in member:
        return siblings | {"allOf": [member], "nullable": True}
    return siblings | member | {"nullable": True}
