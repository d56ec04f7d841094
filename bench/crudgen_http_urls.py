"""The bench model, registered as the service registers its own (workspace/workflows/generated.py):
Django storage, full tracking with the request's user, private to its creator and staff."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import include, path

from collab.identity import current_user_id
from crudgen import Actor, CreatorOnly, CRUDSystem, DjangoStorage, MetadataConfig, ResourceNameStyle
from workspace.urls import urlpatterns as site_urlpatterns


@dataclass
class Task:
    title: str
    done: bool = False
    tags: list[str] = field(default_factory=list)
    priority: int = 0


def _is_staff(actor: Actor) -> bool:
    return actor.is_staff


system = CRUDSystem(
    storage_factory=DjangoStorage,
    metadata_config=MetadataConfig.with_full_tracking(get_current_user=current_user_id),
    use_plural=False,
    resource_name_style=ResourceNameStyle.DASH,
)
tasks = system.register_model(Task, access_policy=CreatorOnly(sees_everything=_is_staff))

urlpatterns = [path("api/v1/", include(system.create_router(prefix=""))), *site_urlpatterns]
