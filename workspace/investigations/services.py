"""Writes of investigations: create, add members, mention (by a person or the agent), status moves,
and storing the row of an `rca` item made through the item routes (`investigation_adopt`)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from collab.actor import Actor
from collab.errors import Invalid
from collab.identity import get_user_directory, unknown_user_ids
from collab.services import notify
from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage
from workspace.investigations.access import INVESTIGATION_APP, InvestigationRight, investigation_for
from workspace.investigations.models import Investigation, InvestigationMember
from workspace.items import services as item_services
from workspace.items.access import app_or_404
from workspace.items.models import Item

AGENT_NAME = "The agent"


def investigation_link(investigation_id: int) -> str:
    return f"/investigations/{investigation_id}"


def _display_name(user_id: str | None) -> str:
    if not user_id:
        return AGENT_NAME
    user = get_user_directory().get(user_id)
    return user.name if user else user_id


def _asked_by(user_id: str) -> str:
    """ ", asked by Alice": an agent's act names the person whose message asked for it, while its
    actor stays null (spec "Resources": null when the agent triggered it)."""
    return f", asked by {_display_name(user_id)}" if user_id else ""


def _known_user_ids(user_ids: Sequence[str]) -> list[str]:
    wanted = list(dict.fromkeys(user_id.strip() for user_id in user_ids))
    unknown = unknown_user_ids(wanted)
    if unknown or "" in wanted:
        named = [user_id for user_id in unknown if user_id] or ["(blank)"]
        raise Invalid(
            error="unknown_users",
            detail=f"Not in the user directory: {', '.join(named)}.",
            user_ids=unknown,
        )
    return wanted


def _members_add(investigation: Investigation, user_ids: Sequence[str], *, by: str | None) -> list[str]:
    """Adds the ones who are neither the creator nor already members; returns those added."""
    existing = set(investigation.members.values_list("user_id", flat=True))
    added = [u for u in user_ids if u != investigation.item.created_by and u not in existing]
    rows = []
    for user_id in added:
        row = InvestigationMember(investigation=investigation, user_id=user_id)
        row.stamp_created(by)
        rows.append(row)
    InvestigationMember.objects.bulk_create(rows)
    return added


def investigation_adopt(investigation_id: int) -> Investigation | None:
    """Stores the investigation side of an `rca` item made through the generic item routes, which
    has no row until first written to (reads build it in memory: `access.investigation_for`), and
    returns it; None when there is no such `rca` item."""
    existing = Investigation.objects.select_related("item").filter(pk=investigation_id).first()
    if existing is not None:
        return existing
    item = Item.objects.filter(pk=investigation_id, app_slug=INVESTIGATION_APP).first()
    if item is None:
        return None
    defaults = {"created_by": item.created_by, "updated_by": item.created_by, "created_at": item.created_at}
    investigation, _created = Investigation.objects.get_or_create(item=item, defaults=defaults)
    return investigation


def _investigation_held(
    investigation_id: int, *, actor: Actor, need: InvestigationRight = InvestigationRight.USE
) -> Investigation:
    """`investigation_for` a write: authorised first, so a stranger's post writes nothing; then
    its row, stored if its `rca` item had none yet, held until commit."""
    investigation = investigation_for(investigation_id, actor=actor, need=need, lock=True)
    if investigation._state.adding:
        investigation_adopt(investigation_id)
        investigation = investigation_for(investigation_id, actor=actor, need=need, lock=True)
    return investigation


@transaction.atomic
def investigation_create(*, title: str, actor: Actor, members: Sequence[str] = ()) -> Investigation:
    """A new `rca` item and its investigation, created by `actor` (who pays for it too); `members`
    join at once."""
    title = item_services.checked_title(title, noun="An investigation")
    known = _known_user_ids(members)
    item = item_services.item_create(app=app_or_404(INVESTIGATION_APP), title=title, actor=actor)
    investigation = Investigation(item=item)
    investigation.stamp_created(actor.user_id)
    investigation.save(force_insert=True)
    _members_add(investigation, known, by=actor.user_id)
    return investigation


@transaction.atomic
def members_add(*, investigation_id: int, actor: Actor, user_ids: Sequence[str]) -> Investigation:
    """Only the creator (who holds the permissions) or staff add members: a member sees and runs
    commands in the item's sandbox, billed to its payer. Unknown ids are a 400
    naming them, with nobody added; people already in are left as they are."""
    investigation = _investigation_held(investigation_id, actor=actor, need=InvestigationRight.OWN)
    wanted = _known_user_ids(user_ids)
    if not wanted:
        raise Invalid(error="validation_error", detail="Name at least one person to add.")
    if _members_add(investigation, wanted, by=actor.user_id):
        investigation.stamp_updated(actor.user_id)
        investigation.save(update_fields=["updated_by", "updated_at"])
    return investigation


def _mention(
    investigation: Investigation, user_ids: Sequence[str], note: str, by: str | None, asked_by: str = ""
) -> ItemMessage:
    """`by`: the person who mentions, None for the agent."""
    mentioned = _known_user_ids(user_ids)
    if not mentioned:
        raise Invalid(error="validation_error", detail="Name at least one user to mention.")
    note = note.strip()
    message = message_append(
        item=investigation.item,
        role=ItemMessage.Role.MENTION,
        content=note or " ".join(f"@{user_id}" for user_id in mentioned),
        user_id=by,
        mentions=mentioned,
    )
    # A mention grants nothing: a mentioned non-member is told, and the link is a 404 for them
    # until the creator adds them (`members_add`). Otherwise any member could bring anyone in to
    # run commands billed to the payer.
    if asked_by:
        note = f"{_display_name(asked_by)} asked the agent to mention you{': ' + note if note else '.'}"
    notify(
        [user_id for user_id in mentioned if user_id != by],
        "mention",
        title=f"{_display_name(by)} mentioned you in {investigation.item.title}{_asked_by(asked_by)}",
        body=note,
        link=investigation_link(investigation.pk),
        actor=by,
    )
    return message


@transaction.atomic
def mention_create(*, investigation_id: int, actor: Actor, user_ids: Sequence[str], note: str = "") -> ItemMessage:
    """A participant mentions colleagues: one `mention` message, one notification each; the agent
    stays idle.

    Allowed whatever the status: a closed investigation may still need someone's eyes.
    """
    investigation = _investigation_held(investigation_id, actor=actor)
    return _mention(investigation, user_ids, note, actor.user_id)


@transaction.atomic
def mention_create_by_agent(
    *, investigation_id: int, user_ids: Sequence[str], note: str = "", asked_by: str = ""
) -> ItemMessage:
    """The agent tool `mention_user`: the same entry and notifications, with actor null; their
    title and body name `asked_by`, the person whose message the agent was answering."""
    investigation = (
        Investigation.objects.select_for_update(of=("self",)).select_related("item").get(pk=investigation_id)
    )
    return _mention(investigation, user_ids, note, None, asked_by)


def status_moves(current: str) -> list[Investigation.Status]:
    """Where an investigation in `current` may move: any status but its own (spec "States" 3)."""
    return [status for status in Investigation.Status if status != current]


def _move(investigation: Investigation, status: str, by: str | None, asked_by: str = "") -> Investigation:
    """`by`: the person who moves it, None for the agent."""
    if status not in Investigation.Status.values:
        raise Invalid(
            error="invalid_status",
            detail=f"status must be one of {', '.join(Investigation.Status.values)}.",
        )
    if status not in status_moves(investigation.status):
        raise Invalid(error="status_unchanged", detail=f"The investigation is already {status}.")
    before = Investigation.Status(investigation.status).label
    investigation.status = status
    investigation.stamp_updated(by)
    investigation.save(update_fields=["status", "updated_by", "updated_at"])
    after = Investigation.Status(status).label
    who = f"{_display_name(by)}{_asked_by(asked_by)}," if asked_by else _display_name(by)
    summary = f"{who} moved the status from {before} to {after}."
    message_append(item=investigation.item, role=ItemMessage.Role.SYSTEM, content=summary, user_id=by)
    everyone = [investigation.item.created_by, *investigation.members.values_list("user_id", flat=True)]
    notify(
        [user_id for user_id in everyone if user_id != by],
        "status",
        title=f"{investigation.item.title} is now {after.lower()}",
        body=summary,
        link=investigation_link(investigation.pk),
        actor=by,
    )
    return investigation


@transaction.atomic
def status_change(*, investigation_id: int, actor: Actor, status: str) -> Investigation:
    """Any move except into the current status; creator and members hear of it, the mover does not.

    The row is locked so two concurrent moves are judged one after the other.
    """
    return _move(_investigation_held(investigation_id, actor=actor), status, actor.user_id)


@transaction.atomic
def status_change_by_agent(*, investigation_id: int, status: str, asked_by: str = "") -> Investigation:
    """The agent flips the status: actor null, so everyone (creator and members) is notified; the
    message names `asked_by`, whose message the agent was answering."""
    investigation = (
        Investigation.objects.select_for_update(of=("self",)).select_related("item").get(pk=investigation_id)
    )
    return _move(investigation, status, None, asked_by)
