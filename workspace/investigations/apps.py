"""Investigations: `rca` items with members and a status. At start-up they tell the items who else
may see an `rca` item and which pages show them, and give the agent its mentions and status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from workspace.items.models import Item


class InvestigationRoom:
    """The agent's side of an investigation (`workspace.agent.rooms.ConversationRoom`)."""

    def enter(self, item: Item) -> bool:
        from workspace.investigations.access import investigation_adopt

        return investigation_adopt(item.pk) is not None

    def mention(self, *, item_id: int, user_ids: list[str], note: str, asked_by: str) -> None:
        from workspace.investigations.services import mention_create_by_agent

        mention_create_by_agent(investigation_id=item_id, user_ids=user_ids, note=note, asked_by=asked_by)

    def set_status(self, *, item_id: int, status: str, asked_by: str) -> None:
        from workspace.investigations.services import status_change_by_agent

        status_change_by_agent(investigation_id=item_id, status=status, asked_by=asked_by)


class InvestigationsConfig(AppConfig):
    name = "workspace.investigations"
    label = "investigations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workspace.agent.rooms import register_room
        from workspace.investigations.access import INVESTIGATION_APP, members_among
        from workspace.items.access import register_shared_with
        from workspace.items.links import register_app_pages

        register_shared_with(app_slug=INVESTIGATION_APP, lookup=members_among)
        # One list of investigations: /a/rca/items sends a browser to /investigations.
        register_app_pages(app_slug=INVESTIGATION_APP, list_url_name="investigations", item_url_name="investigation")
        register_room(app_slug=INVESTIGATION_APP, room=InvestigationRoom())
