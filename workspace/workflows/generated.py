"""The service's own generated CRUD routes (docs/ARCHITECTURE.md §7): workflow definitions, under /api/v1/."""

from __future__ import annotations

from dataclasses import dataclass

from collab.edge import STATUS_BY_KIND
from collab.identity import current_user_id
from crudgen import CRUDSystem, DjangoStorage, MetadataConfig, ResourceNameStyle
from workspace.workflows.access import DATA_REFUSALS, WorkflowAccess


@dataclass
class Workflow:
    """A workflow definition; `steps` are shell commands. Editing keeps revisions, switching back rolls back."""

    name: str
    steps: list[str]
    description: str = ""
    item_id: str | None = None
    every_seconds: int | None = None
    enabled: bool = True


system = CRUDSystem(
    storage_factory=DjangoStorage,
    metadata_config=MetadataConfig.with_full_tracking(get_current_user=current_user_id),
    use_plural=False,
    resource_name_style=ResourceNameStyle.DASH,
)
# Private to their creator and staff; `item_id` must name an item the caller may use. An item's
# workflows (`?item_id=`) are an index walk (the index is created by `migrate`).
# Its refusals of data are domain errors, answered by the edge with their kind's status (the
# route lets them through to it); the OpenAPI document lists those statuses on every write.
access = WorkflowAccess(data_refusal_statuses=tuple(STATUS_BY_KIND[kind] for kind in DATA_REFUSALS))
workflows = system.register_model(Workflow, access_policy=access, indexed_fields=("item_id",))

urlpatterns = system.create_router(prefix="")
