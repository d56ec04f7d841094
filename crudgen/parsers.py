"""JSON request parsers that refuse what would crash the server: nesting past a fixed depth, and
strings that are not text.

Python's JSON decoder recurses once per level, so `[[[[...]]]]` a few thousand deep raises
RecursionError (a 500) and a few hundred deep can still exhaust the stack of code that walks the
result. A body nested deeper than `MAX_JSON_DEPTH` is a 400 `malformed_request` instead; no
model or patch this service takes needs more than a handful of levels.

JSON may also spell half of a UTF-16 surrogate pair (`"\\ud800"`): the decoder accepts it, but
no UTF-8 encoder can store it or send it back, so every later step would fail with a 500. Such
a body is the same 400.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

MAX_JSON_DEPTH = 64
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why `value` cannot be taken (nesting deeper than `limit`, a string holding a lone
    surrogate), or None; one iterative walk, never recursive."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, str):
            if _LONE_SURROGATE.search(current):
                return "holds half of a surrogate pair, which is not text"
            continue
        children = [*current, *current.values()] if isinstance(current, Mapping) else current
        if not isinstance(children, list):
            continue
        for child in children:
            if isinstance(child, Mapping | list) and depth + 1 > limit:
                return f"is nested deeper than {limit} levels"
            stack.append((child, depth + 1))
    return None


def loads_bounded(raw: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` that raises ValueError for what `json_problem` refuses (RecursionError included)."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise ValueError("the JSON is nested too deeply") from exc
    if problem := json_problem(value, limit):
        raise ValueError(f"the JSON {problem}")
    return value


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser that refuses what `json_problem` names: a ParseError (400), never a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the body is nested too deeply.") from exc
        if problem := json_problem(data):
            raise ParseError(f"JSON parse error - the body {problem}.")
        return data


class JsonPatchParser(BoundedJSONParser):
    media_type = "application/json-patch+json"


def route_parsers(request_model: Any) -> list[type[BaseParser]]:
    """The parsers of a route, by its body, each media type advertised by the schema, and a form
    body is a 415. A JSON Patch is also taken as plain `application/json` (what curl and most
    scripts send); `application/json-patch+json` comes first, the one a generated client sends."""
    if request_model == "json_patch":
        return [JsonPatchParser, BoundedJSONParser]
    return [BoundedJSONParser]
