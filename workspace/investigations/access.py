"""Who may see investigations, for an actor: one (`investigation_for`), many (`investigation_rights`;
`members_among`: the investigations' items shared with someone) and the SQL scope of a list
(`investigation_scope`). Missing, not an investigation and not yours all 404; a member asking for
what only the owner may do is 403. Nothing here writes: an `rca` item made through the item routes
has no investigation row until a service stores it (`services.investigation_adopt`)."""

from __future__ import annotations

import enum
from collections.abc import Container, Iterable, Sequence

from django.db.models import Exists, OuterRef, Q
from django.http import Http404

from collab.actor import Actor
from collab.errors import Forbidden
from workspace.investigations.models import Investigation, InvestigationMember
from workspace.items.models import Item

INVESTIGATION_APP = "rca"


class InvestigationRight(enum.IntEnum):
    """What a person may do with an investigation, each right including the one before."""

    USE = 1  # its members: see it, mention, move its status, work in its item
    OWN = 2  # its creator (the spec's owner) and staff: add members too


def investigation_right_of(*, creator: str, members: Container[str], actor: Actor) -> InvestigationRight | None:
    """The rule, decided here once, on an investigation's creator and members already read. Staff
    own every investigation, as they use every item; None: not theirs to know of."""
    if actor.is_staff or actor.is_user(creator):
        return InvestigationRight.OWN
    return InvestigationRight.USE if actor.is_someone and actor.user_id in members else None


def investigation_rights(investigations: Iterable[Investigation], *, actor: Actor) -> dict[int, InvestigationRight]:
    """The right `actor` has to each of `investigations` (with their items), by id: one query for
    the memberships among those they neither created nor see as staff."""
    investigations = list(investigations)
    others = [i.pk for i in investigations if not (actor.is_staff or actor.is_user(i.item.created_by))]
    joined = members_among(others, actor.user_id) if others and actor.is_someone else set()
    rights = {
        i.pk: investigation_right_of(
            creator=i.item.created_by, members={actor.user_id} if i.pk in joined else (), actor=actor
        )
        for i in investigations
    }
    return {pk: right for pk, right in rights.items() if right is not None}


def investigation_right(investigation: Investigation, *, actor: Actor) -> InvestigationRight | None:
    return investigation_rights([investigation], actor=actor).get(investigation.pk)


def investigation_scope(*, actor: Actor) -> Q:
    """The scope of an investigation list, in SQL: those the actor owns (created) or is a member
    of. Staff use every `rca` item through the item routes, but their list is their own too."""
    if not actor.is_someone:
        return Q(pk__in=[])
    member = InvestigationMember.objects.filter(investigation=OuterRef("pk"), user_id=actor.user_id)
    return Q(item__created_by=actor.user_id) | Q(Exists(member))


def members_among(item_ids: Sequence[int], user_id: str) -> set[int]:
    """Of these investigations (by their items' ids), those `user_id` is a member of: the items
    investigations share with someone beyond their creator (`register_shared_with`, whose
    signature this is)."""
    rows = InvestigationMember.objects.filter(investigation_id__in=item_ids, user_id=user_id)
    return set(rows.values_list("investigation_id", flat=True))


def investigation_for(
    investigation_id: int,
    *,
    actor: Actor,
    need: InvestigationRight = InvestigationRight.USE,
    action: str = "add members",
    lock: bool = False,
) -> Investigation:
    """The investigation with its item, if `actor` has the right `need` to it; `lock` holds its row
    until commit. Someone with no right gets 404; a member asking for more learns that only its
    owner (the spec's word for the creator) may `action` (403).

    An `rca` item without its row yet comes back unsaved (`_state.adding`): a read never writes,
    and a writer stores it (`services.investigation_adopt`)."""
    investigation = _investigation_row(investigation_id, lock=lock)
    right = None if investigation is None else investigation_right(investigation, actor=actor)
    if investigation is None or right is None:
        raise Http404("No such investigation.")
    if right < need:
        creator = investigation.item.created_by
        raise Forbidden(error="owner_only", detail=f"Only the investigation's owner ({creator}) can {action}.")
    return investigation


def _investigation_row(investigation_id: int, *, lock: bool) -> Investigation | None:
    rows = Investigation.objects.select_related("item")
    if lock:
        rows = rows.select_for_update(of=("self",))
    found = rows.filter(pk=investigation_id).first()
    return found if found is not None else unadopted_investigation(investigation_id)


def unadopted_investigation(investigation_id: int) -> Investigation | None:
    """The investigation side of an `rca` item made through the generic item routes, built in memory
    (not stored); None when there is no such `rca` item."""
    item = Item.objects.filter(pk=investigation_id, app_slug=INVESTIGATION_APP).first()
    if item is None:
        return None
    return Investigation(item=item, created_by=item.created_by, updated_by=item.created_by, created_at=item.created_at)
