"""Changes to a resource's data: RFC 6902 JSON Patch (HTTP PATCH) and the advanced updater (UpdateOperation)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer

from crudgen.errors import InvalidPatch, ValidationFailed
from crudgen.types import UpdateAction, UpdateOperation

_ALLOWED_OPS = {"add", "remove", "replace", "move", "copy", "test"}


def apply_json_patch(document: dict[str, Any], operations: Any) -> dict[str, Any]:
    """The patched copy of `document`; the original is untouched whatever fails, so nothing half-applies."""
    if not isinstance(operations, list):
        raise InvalidPatch("a JSON Patch body is an array of operations")
    for index, operation in enumerate(operations):
        if not isinstance(operation, Mapping) or operation.get("op") not in _ALLOWED_OPS:
            raise InvalidPatch(f"operation {index}: `op` must be one of {', '.join(sorted(_ALLOWED_OPS))}")
        if not isinstance(operation.get("path"), str):
            raise InvalidPatch(f"operation {index}: `path` must be a JSON Pointer string")
    try:
        return jsonpatch.JsonPatch(operations).apply(document, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise InvalidPatch(f"test operation failed: {exc}") from exc
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, ValueError) as exc:
        raise InvalidPatch(str(exc)) from exc


def _apply_one(current: Any, operation: UpdateOperation, name: str) -> Any:
    """One action on one field. A field that is None (or absent) starts empty for `list_add` and
    `dict_update` and has nothing to remove for `list_remove`, as in autocrud 0.2; a field holding
    another kind of value is refused rather than silently replaced."""
    action = UpdateAction(operation.action)
    if action is UpdateAction.SET_VALUE:
        return copy.deepcopy(operation.value)
    if action in (UpdateAction.LIST_ADD, UpdateAction.LIST_REMOVE):
        if current is None and action is UpdateAction.LIST_REMOVE:
            return None
        current = [] if current is None else current
        if not isinstance(current, list):
            raise ValidationFailed({name: f"{action.value} needs a list field"})
        values = operation.value if isinstance(operation.value, list) else [operation.value]
        if action is UpdateAction.LIST_ADD:
            return [*current, *copy.deepcopy(values)]
        return [item for item in current if item not in values]
    current = {} if current is None else current
    if not isinstance(current, dict) or not isinstance(operation.value, Mapping):
        raise ValidationFailed({name: "dict_update needs a dict field and a mapping value"})
    return {**current, **copy.deepcopy(dict(operation.value))}


def apply_update_operations(document: dict[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Apply `{field: UpdateOperation | plain value}`; a plain value means set_value."""
    result = copy.deepcopy(document)
    for name, operation in updates.items():
        step = (
            operation if isinstance(operation, UpdateOperation) else UpdateOperation(UpdateAction.SET_VALUE, operation)
        )
        result[name] = _apply_one(result.get(name), step, name)
    return result
