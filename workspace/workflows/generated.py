"""The service's own generated CRUD routes (docs/ARCHITECTURE.md §7): workflow definitions, under /api/v1/."""

from __future__ import annotations

from dataclasses import dataclass

from collab.identity import current_user_id
from crudgen import CRUDSystem, DjangoStorage, MetadataConfig, ResourceNameStyle
from workspace.workflows.access import WorkflowAccess


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
workflows = system.register_model(Workflow, access_policy=WorkflowAccess(), indexed_fields=("item_id",))

urlpatterns = system.create_router(prefix="")
