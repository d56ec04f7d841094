"""The Task model of bench/crudgen_http_urls.py on crudgen alone: Django storage, no tracking of
who, no access policy (bench/crudgen_alone_settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import include, path

from crudgen import CRUDSystem, DjangoStorage, ResourceNameStyle


@dataclass
class Task:  # the same fields as bench/crudgen_http_urls.py's (that module loads the whole service)
    title: str
    done: bool = False
    tags: list[str] = field(default_factory=list)
    priority: int = 0


system = CRUDSystem(storage_factory=DjangoStorage, use_plural=False, resource_name_style=ResourceNameStyle.DASH)
tasks = system.register_model(Task)

urlpatterns = [path("api/v1/", include(system.create_router(prefix="")))]
