"""A JSON body's scalars are taken only as the type the document gives them (issue 46.1).

DRF's fields coerce: a CharField takes `12` as "12", an IntegerField "12" as 12, a BooleanField
"yes" as true. A query string or a form has nothing but text, so there that is what parsing
means; in a JSON body it accepts what the document forbids (`{"name": 12}` where a string is
declared). `strict_json_scalars()` (run once, from `CollabConfig.ready`) makes those fields refuse,
with their own "invalid" message (400 `validation_error`), a JSON value of another type; data that
did not come from JSON (a QueryDict, a form) is parsed as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import serializers

# The JSON types each field takes (bool is an int in Python, so it is named apart).
_TAKES: dict[type[serializers.Field], Callable[[Any], bool]] = {
    serializers.CharField: lambda value: isinstance(value, str),
    serializers.IntegerField: lambda value: isinstance(value, int) and not isinstance(value, bool),
    serializers.FloatField: lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    serializers.BooleanField: lambda value: isinstance(value, bool),
}


def _from_json(field: serializers.Field) -> bool:
    """Whether the field is reading a parsed JSON body (plain dicts and lists, not a QueryDict)."""
    data = getattr(field.root, "initial_data", None)
    return type(data) in (dict, list)


def _strict(field_class: type[serializers.Field], takes: Callable[[Any], bool]) -> None:
    parse = field_class.to_internal_value

    def to_internal_value(self: serializers.Field, data: Any) -> Any:
        if not takes(data) and _from_json(self):
            self.fail("invalid")
        return parse(self, data)

    to_internal_value.strict_json = True  # type: ignore[attr-defined]
    field_class.to_internal_value = to_internal_value  # type: ignore[method-assign]


def strict_json_scalars() -> None:
    """Makes DRF's text, number and boolean fields refuse a JSON value of another type (idempotent)."""
    for field_class, takes in _TAKES.items():
        if not getattr(field_class.to_internal_value, "strict_json", False):
            _strict(field_class, takes)
