"""crudgen as a Django app (it owns the DjangoStorage tables)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def create_data_indexes(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """After `migrate`: the expression indexes of the indexed data fields of every system named in
    `settings.CRUDGEN_SYSTEMS` (a registration happens at import, not in a migration)."""
    from django.conf import settings

    from crudgen.system import load_system

    for dotted in getattr(settings, "CRUDGEN_SYSTEMS", []):
        load_system(dotted).ensure_indexes(using)


class CrudgenConfig(AppConfig):
    name = "crudgen"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(create_data_indexes, sender=self, dispatch_uid="crudgen-data-indexes")
