"""JSON request parsers that refuse what would crash the server: nesting past a fixed depth.

Python's JSON decoder recurses once per level, so `[[[[...]]]]` a few thousand deep raises
RecursionError (a 500) and a few hundred deep can still exhaust the stack of code that walks the
result. A body nested deeper than `MAX_JSON_DEPTH` is a 400 `malformed_request` instead; no
model or patch this service takes needs more than a handful of levels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 64


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests lists and objects deeper than `limit`; iterative, so never recursive."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children = current.values() if isinstance(current, Mapping) else current if isinstance(current, list) else ()
        for child in children:
            if isinstance(child, Mapping | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def loads_bounded(raw: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` that raises ValueError for nesting deeper than `limit` (RecursionError included)."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise ValueError("the JSON is nested too deeply") from exc
    if json_depth_exceeds(value, limit):
        raise ValueError(f"the JSON is nested deeper than {limit} levels")
    return value


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with a depth limit: too deep is a ParseError (400), never a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the body is nested too deeply.") from exc
        if json_depth_exceeds(data):
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_JSON_DEPTH} levels.")
        return data


class JsonPatchParser(BoundedJSONParser):
    media_type = "application/json-patch+json"
