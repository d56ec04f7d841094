"""Adapts a registered model (dataclass, TypedDict or msgspec Struct) to validation, plain data and JSON Schema."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import msgspec

from crudgen.errors import ValidationFailed


def is_supported_model(model: Any) -> bool:
    return isinstance(model, type) and (
        dataclasses.is_dataclass(model) or is_typeddict(model) or issubclass(model, msgspec.Struct)
    )


def model_fields(model: type) -> dict[str, Any]:
    """Field name to type hint; the declared order is kept (it is the order of JSON Schema properties)."""
    return get_type_hints(model, include_extras=True)


def required_fields(model: type) -> set[str]:
    if dataclasses.is_dataclass(model):
        return {
            f.name
            for f in dataclasses.fields(model)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
    if is_typeddict(model):
        return set(model.__required_keys__)
    info = msgspec.structs.fields(model)
    return {f.name for f in info if f.required}


def _structured(tp: Any) -> bool:
    return isinstance(tp, type) and is_supported_model(tp)


def _unknown_fields(value: Any, tp: Any, path: str) -> dict[str, str]:
    """msgspec ignores extra keys of dataclasses and TypedDicts; we refuse them, at any depth."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _unknown_fields(value, get_args(tp)[0], path)
    if origin in (Union, types.UnionType):
        candidates = [arg for arg in get_args(tp) if _structured(arg) or get_origin(arg) in (list, dict)]
        if len(candidates) == 1:
            return _unknown_fields(value, candidates[0], path)
        return {}
    if origin is list and isinstance(value, list):
        (item_type,) = get_args(tp) or (Any,)
        found: dict[str, str] = {}
        for index, item in enumerate(value):
            found.update(_unknown_fields(item, item_type, f"{path}[{index}]"))
        return found
    if origin is dict and isinstance(value, Mapping):
        args = get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        found = {}
        for key, item in value.items():
            found.update(_unknown_fields(item, value_type, f"{path}.{key}"))
        return found
    if _structured(tp) and isinstance(value, Mapping):
        hints = model_fields(tp)
        found = {f"{path}.{key}".lstrip("."): "unknown field" for key in value if key not in hints}
        for key, item in value.items():
            if key in hints:
                found.update(_unknown_fields(item, hints[key], f"{path}.{key}"))
        return found
    return {}


def _nul_characters(value: Any, path: str) -> dict[str, str]:
    """Text holding a NUL character, at any depth: PostgreSQL cannot store it (in JSON or text), so
    every storage refuses it alike and the document says so (`crudgen.jsonschema`)."""
    if isinstance(value, str):
        return {path.lstrip(".") or "$": "must not contain a NUL character"} if "\x00" in value else {}
    found: dict[str, str] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            if "\x00" in str(key):
                found[f"{path}.{key!r}".lstrip(".")] = "a key must not contain a NUL character"
            found.update(_nul_characters(item, f"{path}.{key}"))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.update(_nul_characters(item, f"{path}[{index}]"))
    return found


def _naive_datetimes(value: Any, path: str) -> dict[str, str]:
    if isinstance(value, datetime):
        return {path.lstrip("."): "datetime must carry a timezone"} if value.tzinfo is None else {}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif isinstance(value, msgspec.Struct):
        value = {name: getattr(value, name) for name in value.__struct_fields__}
    found: dict[str, str] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            found.update(_naive_datetimes(item, f"{path}.{key}"))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.update(_naive_datetimes(item, f"{path}[{index}]"))
    return found


def to_plain(value: Any) -> Any:
    """JSON-ready data with every declared field present (msgspec alone drops fields equal to defaults)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, msgspec.Struct):
        return {name: to_plain(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, Mapping):
        return {str(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, datetime):
        return msgspec.to_builtins(value.astimezone(UTC))
    return msgspec.to_builtins(value)


class ModelAdapter:
    """Validates request bodies against one model and turns instances into stored plain data."""

    def __init__(self, model: type, default_values: Mapping[str, Any] | None = None) -> None:
        if not is_supported_model(model):
            raise TypeError(f"{model!r} is not a dataclass, TypedDict or msgspec Struct")
        self.model = model
        self.fields = model_fields(model)
        self.required = required_fields(model)
        unknown_defaults = set(default_values or {}) - set(self.fields)
        if unknown_defaults:
            raise ValueError(f"default_values name unknown fields: {', '.join(sorted(unknown_defaults))}")
        self.default_values = dict(default_values or {})

    def with_defaults(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Fill `default_values` for absent keys: they turn required fields into optional ones."""
        filled = {key: to_plain(value) for key, value in self.default_values.items() if key not in data}
        return {**filled, **data}

    def validate(self, data: Any) -> dict[str, Any]:
        """Checked plain data, or ValidationFailed with one message per offending field."""
        if not isinstance(data, Mapping):
            raise ValidationFailed({"$": "expected a JSON object"})
        errors = _unknown_fields(data, self.model, "") | _nul_characters(data, "")
        for name in sorted(self.required - set(data)):
            errors[name] = "field required"
        for name, value in data.items():
            if name in self.fields and name not in errors:
                try:
                    msgspec.convert(value, self.fields[name])
                except msgspec.ValidationError as exc:
                    errors[name] = str(exc)
        if errors:
            raise ValidationFailed(errors)
        try:
            instance = msgspec.convert(dict(data), self.model)
        except msgspec.ValidationError as exc:
            raise ValidationFailed({"$": str(exc)}) from exc
        naive = _naive_datetimes(instance, "")
        if naive:
            raise ValidationFailed(naive)
        return to_plain(instance)

    def instance(self, data: Mapping[str, Any]) -> Any:
        return msgspec.convert(dict(data), self.model)

    def json_schema(self, ref_template: str = "#/components/schemas/{name}") -> tuple[dict[str, Any], dict[str, Any]]:
        """(schema of the model, component definitions it refers to)."""
        (schema,), components = msgspec.json.schema_components([self.model], ref_template=ref_template)
        return schema, components
