"""crudgen as a Django app (it owns the DjangoStorage tables)."""

from django.apps import AppConfig


class CrudgenConfig(AppConfig):
    name = "crudgen"
    default_auto_field = "django.db.models.BigAutoField"
