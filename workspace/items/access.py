"""Who may do what with items, for an actor: one item (`item_for`, `item_right`), many items
(`item_rights`, `usable_item_ids`, `item_links`) and the SQL scope of a list (`item_scope`). Every
caller asks here. An unknown app, a missing item and someone else's item all 404; the payer of an
item someone else created may tend it (`ItemRight.TEND`), and asking for more is a 403 that says
what they may do."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

from django.db import connection
from django.db.models import QuerySet
from django.http import Http404
from django.urls import reverse

from collab.actor import Actor
from collab.errors import Forbidden
from collab.rows import ModelRows, PlannedStatement
from quotas import ledger
from quotas.host import ItemLink
from quotas.models import SandboxActivity
from workspace.items.config import AppDescriptor, get_config
from workspace.items.links import own_list_page
from workspace.items.models import Item

# Given item ids of one app and a user, the ids among them the user may see without having created
# them (an investigation's members). Apps built on items register one at start-up, so items never
# import them.
SharedWith = Callable[[Sequence[int], str], set[int]]
_shared_with: dict[str, SharedWith] = {}
# Every request about an item reads it here first, so the read is written as SQL: building the
# ORM's query took longer than running it (bench/exec.py). tests/items/test_exec_sql.py holds
# it to the ORM's answer.
_ITEMS, _ITEM_ROWS = Item._meta.db_table, ModelRows(Item)
_ITEM_OF_APP = PlannedStatement(
    "workspace_item_of_app", f"SELECT {_ITEM_ROWS.columns(_ITEMS)} FROM {_ITEMS} WHERE id = %s AND app_slug = %s"
)
# An exec's item with its live sandbox row: the two reads every exec starts with, in one statement.
_ITEM_OF_APP_WITH_LIVE_ROW = PlannedStatement(
    "workspace_item_of_app_with_live_row",
    f"SELECT {_ITEM_ROWS.columns('i')}, {ledger.ACTIVITY_ROWS.columns('a')} FROM {_ITEMS} i "
    f"LEFT JOIN {SandboxActivity._meta.db_table} a ON a.id = ({ledger.LIVE_ROW_ID_OF_ITEM}) "
    "WHERE i.id = %s AND i.app_slug = %s",
)


def register_shared_with(*, app_slug: str, lookup: SharedWith) -> None:
    _shared_with[app_slug] = lookup


def shared_with(items: Iterable[tuple[int, str]], user_id: str) -> set[int]:
    """The ids among `items` ((id, app slug) pairs) their apps share with `user_id`: one query per
    app that shares, none for the rest."""
    by_app: dict[str, list[int]] = {}
    for item_id, app_slug in items:
        if app_slug in _shared_with:
            by_app.setdefault(app_slug, []).append(item_id)
    shared: set[int] = set()
    for app_slug, item_ids in by_app.items():
        shared |= _shared_with[app_slug](item_ids, user_id)
    return shared


def app_or_404(slug: str) -> AppDescriptor:
    app = get_config().app(slug)
    if app is None:
        raise Http404(f"There is no app {slug!r}.")
    return app


class ItemRight(enum.IntEnum):
    """What a person may do with an item, each right including the one before.

    TEND is the payer's (docs/ARCHITECTURE.md §5, spec "Area A" 5: My resources lets the blocked
    person follow links to items whose disk can be cleaned). Whoever pays for an item they did not
    create sees its title, its disk and its files by name and size, may delete or shrink those
    files and close its sandbox, and hands the bill back on My resources. They pay; they do not
    work there: reading a file's content, writing, running commands, the chat and workflows stay
    with those who may USE it (the creator, staff, and whom its app shares it with).
    """

    TEND = 1
    USE = 2


def item_rights(items: Iterable[Item], *, actor: Actor) -> dict[int, ItemRight]:
    """The right `actor` has to each of `items`, by id; an item missing from the answer is not
    theirs to know of. The creator holds the permissions whatever `owner` says; staff see
    everything; the payer tends.

    An app may share its items further (an investigation's members see its item, so a mention's
    link opens for them); that costs one indexed lookup per app that shares, and only for the
    items the actor did not create.
    """
    items = list(items)
    if actor.is_staff:
        return {item.pk: ItemRight.USE for item in items}
    if not actor.is_someone:
        return {}
    rights = {item.pk: ItemRight.USE for item in items if actor.is_user(item.created_by)}
    others = [item for item in items if item.pk not in rights]
    shared = shared_with([(item.pk, item.app_slug) for item in others], actor.user_id) if others else set()
    for item in others:
        if item.pk in shared:
            rights[item.pk] = ItemRight.USE
        elif item.payer == actor.user_id:
            rights[item.pk] = ItemRight.TEND
    return rights


def item_right(item: Item, *, actor: Actor) -> ItemRight | None:
    """`item_rights` of one item. None: the item is not theirs to know of."""
    return item_rights([item], actor=actor).get(item.pk)


def usable_item_ids(items: Iterable[Item], *, actor: Actor) -> set[int]:
    """The ids among `items` the actor may use (`can_view` for many)."""
    return {pk for pk, right in item_rights(items, actor=actor).items() if right == ItemRight.USE}


def item_links(item_ids: Sequence[str], *, actor: Actor) -> dict[str, ItemLink]:
    """The titles of the items among `item_ids` that exist, each linking to its page only where
    `actor` has any right to it: the payer of someone else's item opens it too, to free its disk
    there (docs/ARCHITECTURE.md §5). One query for the items, plus `item_rights`' lookups."""
    numbers = [int(item_id) for item_id in item_ids if item_id.isdigit() and len(item_id) < 19]
    if not numbers:
        return {}
    rows = list(Item.objects.filter(pk__in=numbers).only("pk", "app_slug", "title", "created_by", "owner"))
    openable = item_rights(rows, actor=actor)
    return {
        str(item.pk): ItemLink(
            item_id=str(item.pk),
            app_slug=item.app_slug,
            title=item.title,
            url=_files_page(item) if item.pk in openable else "",
        )
        for item in rows
    }


def _files_page(item: Item) -> str:
    """The item page with its files, where its disk is freed: for an app with a page of its own
    (investigations), whose bare item URL sends its users there, with `folder` (items/pages.py)."""
    url = reverse("ws-item", args=[item.app_slug, item.pk])
    return f"{url}?folder=" if own_list_page(item.app_slug) else url


def item_scope(*, actor: Actor) -> QuerySet[Item]:
    """The scope of an item list, in SQL: the actor's own items; staff list everyone's. (Items
    shared with someone are listed by the app that shares them, investigations under
    /investigations; the items they pay for on My resources.)"""
    if actor.is_staff:
        return Item.objects.all()
    return Item.objects.filter(created_by=actor.user_id) if actor.is_someone else Item.objects.none()


def can_view(item: Item, *, actor: Actor) -> bool:
    """Whether the person may use the item (everything but paying for it: see `ItemRight`)."""
    return item_right(item, actor=actor) == ItemRight.USE


def payer_only(item: Item) -> Forbidden:
    return Forbidden(
        error="payer_only",
        detail=(
            f"You pay for {item.title!r} but {item.created_by} created it: you may see its files, delete or "
            f"shrink them, close its sandbox and hand the bill back to {item.created_by} on My resources; "
            "running commands, reading or writing files and the chat are theirs."
        ),
    )


def item_for(slug: str, item_id: int, *, actor: Actor, need: ItemRight = ItemRight.USE) -> tuple[AppDescriptor, Item]:
    """One query: the item of app `slug`, if the caller has the right `need` to it. Someone with
    no right at all gets 404 (not theirs reads as not there); the payer asking for more than
    they have gets 403 `payer_only`, since they know the item exists (My resources lists it)."""
    app = app_or_404(slug)
    row = _item_row(_ITEM_OF_APP, item_id, [item_id, slug])
    return app, _authorised(None if row is None else _ITEM_ROWS.instance(row, connection=connection), actor, need)


def item_for_exec(slug: str, item_id: int, *, actor: Actor) -> tuple[AppDescriptor, Item, ledger.LiveRowRead]:
    """`item_for` for a use, with the item's live sandbox row read in the same statement (an
    exec's first two reads in one round trip). The row is only looked at once the item is theirs."""
    app = app_or_404(slug)
    row = _item_row(_ITEM_OF_APP_WITH_LIVE_ROW, item_id, [*ledger.live_row_params(item_id), item_id, slug])
    width = _ITEM_ROWS.width
    item = _authorised(None if row is None else _ITEM_ROWS.instance(row[:width], connection=connection), actor)
    live = ledger.ACTIVITY_ROWS.instance_if_any(row[width:], connection=connection)
    return app, item, ledger.LiveRowRead(live)


def _item_row(statement: PlannedStatement, item_id: int, params: list[object]) -> tuple[object, ...] | None:
    # An id no column can hold names no item (the URL's converter bounds it too; SQL would fail).
    if not 0 < item_id < 2**63:
        return None
    return statement.fetch_one(params, connection=connection)


def _authorised(item: Item | None, actor: Actor, need: ItemRight = ItemRight.USE) -> Item:
    right = None if item is None else item_right(item, actor=actor)
    if item is None or right is None:
        raise Http404("No such item.")
    if right < need:
        raise payer_only(item)
    return item
