"""Resource names from model class names: word split, English plural, and the three styles."""

from __future__ import annotations

import re

from crudgen.types import ResourceNameStyle

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+")


def pluralize(word: str) -> str:
    lower = word.lower()
    if re.search(r"(s|x|z|ch|sh)$", lower):
        return word + "es"
    if re.search(r"[^aeiou]y$", lower):
        return word[:-1] + "ies"
    return word + "s"


def resource_name_for(model_name: str, style: ResourceNameStyle, plural: bool) -> str:
    words = [word.lower() for word in _WORD.findall(model_name)] or [model_name.lower()]
    if plural:
        words[-1] = pluralize(words[-1])
    if style is ResourceNameStyle.CAMEL:
        return words[0] + "".join(word.capitalize() for word in words[1:])
    separator = "-" if style is ResourceNameStyle.DASH else "_"
    return separator.join(words)
