"""CRUDSystem: many models under one registry, with shared metadata, storage factory and URL generation."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, path

from crudgen import backup
from crudgen.access import AccessPolicy
from crudgen.crud import SchemaMigration, SingleModelCRUD
from crudgen.metadata import MetadataConfig
from crudgen.naming import resource_name_for
from crudgen.plugins import PluginManager, plugin_manager
from crudgen.storage.base import Storage
from crudgen.storage.memory import MemoryStorage
from crudgen.types import ResourceNameStyle, RouteConfig
from crudgen.views import crud_urlpatterns


def _normalise_prefix(prefix: str) -> str:
    stripped = prefix.strip("/")
    return f"{stripped}/" if stripped else ""


def _make_storage(factory: Callable[..., Storage], resource_name: str) -> Storage:
    """Factories may take the resource name (e.g. `DjangoStorage`, `lambda name: DiskStorage(root / name)`)."""
    try:
        takes_name = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes_name = True
    return factory(resource_name) if takes_name else factory()


class CRUDSystem:
    def __init__(
        self,
        storage_factory: Callable[..., Storage] | None = None,
        metadata_config: MetadataConfig | None = None,
        id_generator: Callable[[], str] | None = None,
        use_plural: bool = True,
        resource_name_style: ResourceNameStyle = ResourceNameStyle.SNAKE,
        plugin_manager: PluginManager | None = None,
        access_policy: AccessPolicy | None = None,
    ) -> None:
        self.storage_factory = storage_factory or MemoryStorage
        self.metadata_config = metadata_config or MetadataConfig()
        self.id_generator = id_generator
        self.use_plural = use_plural
        self.resource_name_style = ResourceNameStyle(resource_name_style)
        self.plugin_manager = plugin_manager
        self.access_policy = access_policy
        self.cruds: dict[str, SingleModelCRUD] = {}
        self._names_by_model: dict[type, list[str]] = {}

    def register_model(
        self,
        model: type,
        resource_name: str | None = None,
        storage: Storage | None = None,
        use_plural: bool | None = None,
        default_values: Mapping[str, Any] | None = None,
        migration: SchemaMigration | None = None,
        access_policy: AccessPolicy | None = None,
        indexed_fields: Sequence[str] = (),
    ) -> SingleModelCRUD:
        """Register `model`; the plural option only shapes a name derived from the class, never a given one.

        `access_policy` (else the system's, else open) decides who lists, reads and changes its resources.
        `indexed_fields` names scalar fields whose filters DjangoStorage backs with an expression
        index (created by `migrate` for systems in `CRUDGEN_SYSTEMS`, or by `ensure_indexes()`).
        """
        if resource_name is None:
            plural = self.use_plural if use_plural is None else use_plural
            resource_name = resource_name_for(model.__name__, self.resource_name_style, plural)
        if resource_name in self.cruds:
            raise ValueError(f"resource name {resource_name!r} is already registered")
        crud = SingleModelCRUD(
            model,
            storage if storage is not None else _make_storage(self.storage_factory, resource_name),
            resource_name,
            id_generator=self.id_generator,
            metadata_config=self.metadata_config,
            default_values=default_values,
            migration=migration,
            access_policy=access_policy or self.access_policy,
            indexed_fields=indexed_fields,
        )
        self.cruds[resource_name] = crud
        self._names_by_model.setdefault(model, []).append(resource_name)
        return crud

    def get_crud(self, model: type | str) -> SingleModelCRUD:
        """The CRUD of a model class (or resource name); ambiguous or unknown classes raise ValueError."""
        if isinstance(model, str):
            if model not in self.cruds:
                raise ValueError(f"no model registered as {model!r}")
            return self.cruds[model]
        names = self._names_by_model.get(model, [])
        if not names:
            raise ValueError(f"{model.__name__} is not registered")
        if len(names) > 1:
            raise ValueError(
                f"{model.__name__} is registered under several names ({', '.join(names)}); look it up by name"
            )
        return self.cruds[names[0]]

    def create_router(
        self, prefix: str = "", route_config: RouteConfig | None = None, plugin_manager_: PluginManager | None = None
    ) -> list[URLPattern]:
        manager = plugin_manager_ or self.plugin_manager or plugin_manager
        config = route_config or RouteConfig()
        base = _normalise_prefix(prefix)
        patterns: list[URLPattern] = []
        for crud in self.cruds.values():
            patterns += crud_urlpatterns(crud, base, config, manager)
        return patterns

    def create_app(
        self,
        title: str = "Multi-Model CRUD API",
        description: str = "",
        version: str = "1.0.0",
        prefix: str = "/api/v1",
        route_config: RouteConfig | None = None,
    ) -> list[URLPattern]:
        """The router's patterns plus `<prefix>/openapi.json`, a schema of exactly these routes, in JSON.

        The schema needs drf-spectacular (`pip install 'crudgen[openapi]'`); `create_router` does not.
        """
        try:
            from drf_spectacular.views import SpectacularJSONAPIView
        except ImportError as exc:
            raise ImproperlyConfigured(
                "create_app serves an OpenAPI schema and needs drf-spectacular: pip install 'crudgen[openapi]' "
                "(or use create_router)"
            ) from exc

        patterns = self.create_router(prefix, route_config)
        schema_view = SpectacularJSONAPIView.as_view(
            patterns=list(patterns),
            custom_settings={"TITLE": title, "DESCRIPTION": description, "VERSION": version},
        )
        return [*patterns, path(f"{_normalise_prefix(prefix)}openapi.json", schema_view, name="crudgen-openapi")]

    def ensure_indexes(self, using: str | None = None) -> list[str]:
        """Create the expression indexes of every model's indexed fields where missing; their names."""
        return [name for crud in self.cruds.values() for name in crud.storage.ensure_indexes(using)]

    def dump(self, stream: IO[Any]) -> int:
        return backup.dump(self.cruds, stream)

    def load(self, stream: IO[Any], on_duplicate: str = backup.OnDuplicate.OVERWRITE) -> backup.LoadReport:
        return backup.load(self.cruds, stream, on_duplicate)

    def migrate_stored(self) -> dict[str, int]:
        """Rewrite stored data of every model with a migration to its current schema version."""
        return {name: crud.migrate_stored() for name, crud in self.cruds.items()}


def load_system(dotted: str) -> CRUDSystem:
    """`package.module.attribute` or `package.module:attribute`."""
    module_path, _, attribute = dotted.replace(":", ".").rpartition(".")
    try:
        system = getattr(importlib.import_module(module_path), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImproperlyConfigured(f"cannot import CRUD system {dotted!r}: {exc}") from exc
    if not isinstance(system, CRUDSystem):
        raise ImproperlyConfigured(f"{dotted!r} is not a CRUDSystem")
    return system
