"""The agent's side of an investigation (`workspace.agent.rooms.ConversationRoom`): its turns in an
`rca` item take mentions and a status. Registered by `InvestigationsConfig.ready`."""

from __future__ import annotations

from workspace.investigations.services import investigation_adopt, mention_create_by_agent, status_change_by_agent
from workspace.items.models import Item


class InvestigationRoom:
    def enter(self, item: Item) -> bool:
        return investigation_adopt(item.pk) is not None

    def mention(self, *, item_id: int, user_ids: list[str], note: str, asked_by: str) -> None:
        mention_create_by_agent(investigation_id=item_id, user_ids=user_ids, note=note, asked_by=asked_by)

    def set_status(self, *, item_id: int, status: str, asked_by: str) -> None:
        status_change_by_agent(investigation_id=item_id, status=status, asked_by=asked_by)
