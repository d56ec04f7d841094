"""Storage backends; DjangoStorage is imported lazily because its models need a ready app registry."""

from __future__ import annotations

from typing import Any

from crudgen.storage.base import Storage, Stored, WriteSession
from crudgen.storage.disk import DiskStorage
from crudgen.storage.memory import MemoryStorage

__all__ = ["DiskStorage", "DjangoStorage", "MemoryStorage", "Storage", "Stored", "WriteSession"]


def __getattr__(name: str) -> Any:
    if name == "DjangoStorage":
        from crudgen.storage.database import DjangoStorage

        return DjangoStorage
    raise AttributeError(name)
