"""Who may see investigations, for an actor: one (`investigation_for_member`, `investigation_for_creator`),
many (`members_among`: the investigations' items shared with someone) and the SQL scope of a list
(`participated`). Missing, not an investigation and not yours all 404; a member asking for what
only the creator may do is 403."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Exists, OuterRef, Q
from django.http import Http404

from collab.actor import Actor
from collab.errors import Forbidden
from workspace.investigations.models import Investigation, InvestigationMember
from workspace.items.models import Item

INVESTIGATION_APP = "rca"


def participated(*, actor: Actor) -> Q:
    """The scope of an investigation list, in SQL: those the actor owns (created) or is a member
    of. Staff use every `rca` item through the item routes, but their list is their own too."""
    if not actor.is_someone:
        return Q(pk__in=[])
    member = InvestigationMember.objects.filter(investigation=OuterRef("pk"), user_id=actor.user_id)
    return Q(item__created_by=actor.user_id) | Q(Exists(member))


def members_among(item_ids: Sequence[int], user_id: str) -> set[int]:
    """Of these investigations (by their items' ids), those `user_id` is a member of: the items
    investigations share with someone beyond their creator (`register_shared_with`)."""
    rows = InvestigationMember.objects.filter(investigation_id__in=item_ids, user_id=user_id)
    return set(rows.values_list("investigation_id", flat=True))


def is_participant(investigation: Investigation, user_id: str) -> bool:
    """The creator (of the item, who holds the permissions) or a member."""
    if not user_id:
        return False
    if investigation.item.created_by == user_id:
        return True
    return InvestigationMember.objects.filter(investigation_id=investigation.pk, user_id=user_id).exists()


def investigation_adopt(investigation_id: int, *, store: bool = True) -> Investigation | None:
    """The investigation side of an `rca` item made through the generic item routes, which has no
    row until first written to: stored by writers (`store`), only built in memory for readers, so
    a GET never writes."""
    item = Item.objects.filter(pk=investigation_id, app_slug=INVESTIGATION_APP).first()
    if item is None:
        return None
    existing = Investigation.objects.select_related("item").filter(pk=investigation_id).first()
    if existing is not None:
        return existing
    defaults = {"created_by": item.created_by, "updated_by": item.created_by, "created_at": item.created_at}
    if not store:
        return Investigation(item=item, **defaults)
    investigation, _created = Investigation.objects.get_or_create(item=item, defaults=defaults)
    return investigation


def _investigation(investigation_id: int, *, lock: bool) -> Investigation | None:
    rows = Investigation.objects.select_related("item")
    if lock:
        rows = rows.select_for_update(of=("self",))
    investigation = rows.filter(pk=investigation_id).first()
    if investigation is None:
        investigation = investigation_adopt(investigation_id, store=lock)
    return investigation


def investigation_for_member(investigation_id: int, user_id: str, *, lock: bool = False) -> Investigation:
    """The investigation with its item, if `user_id` owns it or is a member; `lock` for writers."""
    investigation = _investigation(investigation_id, lock=lock)
    if investigation is None or not is_participant(investigation, user_id):
        raise Http404("No such investigation.")
    return investigation


def investigation_for_creator(investigation_id: int, *, actor: Actor, action: str, lock: bool = False) -> Investigation:
    """The creator or staff get the investigation; a member learns that only its owner (the spec's
    word for the creator) may `action` (403), anyone else that there is no such investigation (404)."""
    user_id = actor.user_id
    if actor.is_staff:
        investigation = _investigation(investigation_id, lock=lock)
        if investigation is None:
            raise Http404("No such investigation.")
        return investigation
    investigation = investigation_for_member(investigation_id, user_id, lock=lock)
    creator = investigation.item.created_by
    if creator != user_id:
        raise Forbidden(error="owner_only", detail=f"Only the investigation's owner ({creator}) can {action}.")
    return investigation
