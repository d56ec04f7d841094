"""Changes to a resource's data: RFC 6902 JSON Patch (HTTP PATCH) and the advanced updater (UpdateOperation)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer

from crudgen.errors import InvalidPatch, ValidationFailed
from crudgen.parsers import json_problem
from crudgen.types import UpdateAction, UpdateOperation

_ALLOWED_OPS = {"add", "remove", "replace", "move", "copy", "test"}
# What the `copy` operations of one patch may add, in JSON characters (roughly): every other
# operation adds at most what the body carries, but a copy of a value into itself doubles it, so
# a body of 2 KB (`copy /steps to /steps/-`, some 30 times) would otherwise ask for gigabytes.
MAX_PATCH_COPIED_SIZE = 1_000_000


def _json_size(value: Any, limit: int) -> int:
    """About how many characters `value` takes as JSON, counted only until past `limit`."""
    size, stack = 0, [value]
    while stack and size <= limit:
        current = stack.pop()
        size += 1
        if isinstance(current, str):
            size += len(current)
        elif isinstance(current, Mapping):
            size += sum(len(key) for key in current)
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return size


def _copied_size(document: Any, operation: Mapping[str, Any], limit: int) -> int:
    """What a `copy` operation would add to `document` (0 for any other operation)."""
    source = operation.get("from")
    if operation["op"] != "copy" or not isinstance(source, str):
        return 0
    return _json_size(jsonpointer.resolve_pointer(document, source), limit)


def apply_json_patch(document: dict[str, Any], operations: Any) -> dict[str, Any]:
    """The patched copy of `document`; the original is untouched whatever fails, so nothing half-applies.

    Operations apply one at a time, so a copy's size is known before it is made. The result is
    held to what a body may be (`crudgen.parsers.json_problem`): each operation's value is, but
    adding at the deepest point again and again nests the document past any limit, and every
    later step that walks it (validation, storage, rendering) would fail with RecursionError.
    """
    if not isinstance(operations, list):
        raise InvalidPatch("a JSON Patch body is an array of operations")
    for index, operation in enumerate(operations):
        if not isinstance(operation, Mapping) or operation.get("op") not in _ALLOWED_OPS:
            raise InvalidPatch(f"operation {index}: `op` must be one of {', '.join(sorted(_ALLOWED_OPS))}")
        if not isinstance(operation.get("path"), str):
            raise InvalidPatch(f"operation {index}: `path` must be a JSON Pointer string")
    try:
        patched: Any = copy.deepcopy(document)
        copied = 0
        for index, operation in enumerate(operations):
            copied += _copied_size(patched, operation, MAX_PATCH_COPIED_SIZE - copied)
            if copied > MAX_PATCH_COPIED_SIZE:
                raise InvalidPatch(
                    f"operation {index}: the patch's copies would add more than {MAX_PATCH_COPIED_SIZE} "
                    "characters of data"
                )
            patched = jsonpatch.JsonPatch([operation]).apply(patched, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise InvalidPatch(f"test operation failed: {exc}") from exc
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, ValueError) as exc:
        raise InvalidPatch(str(exc)) from exc
    except RecursionError as exc:
        # A copy or a test of a value nested deeper than the interpreter recurses.
        raise InvalidPatch("the patched document is nested too deeply") from exc
    if problem := json_problem(patched):
        raise InvalidPatch(f"the patched document {problem}")
    return patched


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
