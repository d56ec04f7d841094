"""Attacks on the day's changes: an opening exec that stores its sandbox's id with its command's
record (lifecycle.py `unattached`), raced by a close of the same item."""

from __future__ import annotations

import pytest

from collab.errors import Conflict
from quotas import ledger
from quotas.models import SandboxActivity
from workspace.items import lifecycle
from workspace.items.config import get_config

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("lands", ["before", "after"], ids=["just before the close marks it", "just after"])
def test_a_sandbox_whose_opening_exec_stores_its_id_while_a_close_is_under_way_does_not_run_on_uncounted(
    make_item, monkeypatch, lands
):
    # Given alice's notebook, whose first command has opened its sandbox but not stored its id yet
    item = make_item()
    app = get_config().app(item.app_slug)
    activity, opened = lifecycle.sandbox_open_for_exec(item=item, app=app)
    assert opened is not None
    # ...and that command's first write (which stores the id) landing while bob's close is under
    # way: after the close read the item's rows, just before or just after it marks the row closing
    outcomes: list[object] = []
    marking = ledger.activity_closing

    def close_meanwhile(**kwargs) -> None:
        if lands == "after":
            marking(**kwargs)
        if not outcomes:
            try:
                outcomes.append(
                    lifecycle.sandbox_exec(
                        item=item, app=app, command="true", timeout=5, ready=(activity, True), unattached=opened
                    )
                )
            except Conflict as refused:
                outcomes.append(refused)
        if lands == "before":
            marking(**kwargs)

    monkeypatch.setattr(lifecycle.ledger, "activity_closing", close_meanwhile)
    # When bob closes the item's sandbox
    lifecycle.sandbox_close(item=item, closed_by="bob")
    # Then the sandbox is gone with its row: none of the item's runs on that the ledger does not count
    assert outcomes
    assert not lifecycle.backend_at("local").probe(opened.id)
    assert opened.id not in lifecycle.backend_at("local").sandboxes()
    assert not SandboxActivity.current.filter(item_id=item.pk).exists()
