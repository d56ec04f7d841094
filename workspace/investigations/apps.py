"""Investigations: `rca` items with members and a status. At start-up they tell the items who else
may see an `rca` item and which pages show them, and give the agent its mentions and status."""

from __future__ import annotations

from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    name = "workspace.investigations"
    label = "investigations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workspace.agent.rooms import register_room
        from workspace.investigations.access import INVESTIGATION_APP, members_among
        from workspace.investigations.room import InvestigationRoom
        from workspace.items.access import register_shared_with
        from workspace.items.links import register_app_pages

        register_shared_with(app_slug=INVESTIGATION_APP, lookup=members_among)
        # One list of investigations: /a/rca/items sends a browser to /investigations.
        register_app_pages(app_slug=INVESTIGATION_APP, list_url_name="investigations", item_url_name="investigation")
        register_room(app_slug=INVESTIGATION_APP, room=InvestigationRoom())
