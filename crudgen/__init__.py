"""crudgen: DRF routes with revisions, generated from registered dataclasses, TypedDicts and msgspec Structs.

Names are resolved lazily so that `import crudgen` during Django's app loading pulls in neither
DRF views nor crudgen's models before the app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.4.0"

_EXPORTS = {
    "CRUDSystem": "crudgen.system",
    "AccessPolicy": "crudgen.access",
    "AccessAction": "crudgen.access",
    "Actor": "crudgen.access",
    "PlainActor": "crudgen.access",
    "CreatorOnly": "crudgen.access",
    "ListScope": "crudgen.access",
    "Caller": "crudgen.access",
    "SingleModelCRUD": "crudgen.crud",
    "SchemaMigration": "crudgen.crud",
    "MetadataConfig": "crudgen.metadata",
    "ListQueryParams": "crudgen.types",
    "ListResult": "crudgen.types",
    "SortOrder": "crudgen.types",
    "RouteConfig": "crudgen.types",
    "RouteOptions": "crudgen.types",
    "BackgroundTaskMode": "crudgen.types",
    "PluginRouteConfig": "crudgen.types",
    "HTTPMethod": "crudgen.types",
    "UpdateOperation": "crudgen.types",
    "UpdateAction": "crudgen.types",
    "DataFilter": "crudgen.types",
    "ResourceNameStyle": "crudgen.types",
    "Storage": "crudgen.storage.base",
    "MemoryStorage": "crudgen.storage.memory",
    "DiskStorage": "crudgen.storage.disk",
    "DjangoStorage": "crudgen.storage.database",
    "Serializer": "crudgen.serializers",
    "JsonSerializer": "crudgen.serializers",
    "PickleSerializer": "crudgen.serializers",
    "MsgpackSerializer": "crudgen.serializers",
    "get_serializer": "crudgen.serializers",
    "PluginManager": "crudgen.plugins",
    "RoutePlugin": "crudgen.plugins",
    "RouteContext": "crudgen.plugins",
    "plugin_manager": "crudgen.plugins",
    "OnDuplicate": "crudgen.backup",
    "LoadReport": "crudgen.backup",
    "CrudError": "crudgen.errors",
    "NotFoundError": "crudgen.errors",
    "ResourceDeletedError": "crudgen.errors",
    "ValidationFailed": "crudgen.errors",
    "InvalidPatch": "crudgen.errors",
    "RevisionConflict": "crudgen.errors",
    "DuplicateResource": "crudgen.errors",
    "NotDeletedError": "crudgen.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'crudgen' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
