"""Byte serializers a storage can pick by name: `json`, `pickle` or `msgpack`."""

from __future__ import annotations

import pickle
from typing import Any, Protocol

import msgspec
from django.core.exceptions import ImproperlyConfigured


class Serializer(Protocol):
    name: str
    extension: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, raw: bytes) -> Any: ...


class JsonSerializer:
    name = "json"
    extension = "json"

    def dumps(self, value: Any) -> bytes:
        return msgspec.json.encode(value)

    def loads(self, raw: bytes) -> Any:
        return msgspec.json.decode(raw)


class PickleSerializer:
    """Fast and exact for Python values; only for storage you trust, as unpickling runs code."""

    name = "pickle"
    extension = "pickle"

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, raw: bytes) -> Any:
        return pickle.loads(raw)


class MsgpackSerializer:
    """Needs the `msgpack` extra (`pip install crudgen[msgpack]`); asking for it without is a clear error."""

    name = "msgpack"
    extension = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack
        except ImportError as exc:
            raise ImproperlyConfigured("the msgpack serializer needs msgpack: pip install 'crudgen[msgpack]'") from exc
        self._msgpack = msgpack

    def dumps(self, value: Any) -> bytes:
        return self._msgpack.packb(value, use_bin_type=True)

    def loads(self, raw: bytes) -> Any:
        return self._msgpack.unpackb(raw, raw=False, strict_map_key=False)


SERIALIZERS: dict[str, type[JsonSerializer] | type[PickleSerializer] | type[MsgpackSerializer]] = {
    "json": JsonSerializer,
    "pickle": PickleSerializer,
    "msgpack": MsgpackSerializer,
}


def get_serializer(choice: str | Serializer) -> Serializer:
    if not isinstance(choice, str):
        return choice
    try:
        return SERIALIZERS[choice]()
    except KeyError:
        raise ValueError(f"unknown serializer {choice!r}; choose one of {', '.join(SERIALIZERS)}") from None
