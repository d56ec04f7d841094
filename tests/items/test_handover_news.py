"""Handovers are not silent: the addressee sees what waits for her answer on her dashboard and in
the header; who asked sees on his dashboard that it was accepted, declined or handed back. The
spec fixes the notification kinds, so none of this is a notification."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collab.actor import Actor
from collab.models import Notification
from workspace.home import HANDOVER_NEWS_DAYS
from workspace.items import services
from workspace.items.models import HandoverEvent, Item
from workspace.items.selectors import handover_news, pending_handover_count

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def _asked(make_item, title: str = "Shared notes", *, by: str = "bob", to: str = "carol") -> Item:
    """`by`'s item, whose bill he asked `to` to take over."""
    item = make_item(title=title, created_by=by)
    return services.item_update(item=item, actor=Actor(by), payer=to)


def _card(response, testid: str) -> str:
    html = response.content.decode()
    start = html.index(f'data-testid="{testid}"')
    return html[start : html.index("</section>", start)]


def test_accepting_and_declining_keep_the_answer_for_who_asked(make_item, clock):
    # Given two of bob's items whose bills he asked carol to take over
    accepted, declined = _asked(make_item, "One"), _asked(make_item, "Two")

    # When carol accepts the first and declines the second
    services.item_handover_answer(item_id=accepted.pk, actor=Actor("carol"), accept=True)
    services.item_handover_answer(item_id=declined.pk, actor=Actor("carol"), accept=False)

    # Then bob is told of both, newest first, and no notification of a new kind was made
    news = handover_news(user_id="bob", since=clock.now() - timedelta(days=1), limit=5)
    assert [(e.item_id, e.outcome, e.by) for e in news] == [
        (declined.pk, "declined", "carol"),
        (accepted.pk, "accepted", "carol"),
    ]
    assert not Notification.objects.exists()


def test_handing_the_bill_back_tells_the_creator_but_not_who_did_it(make_item, clock):
    # Given bob's item whose bill carol accepted, and alice's item she pays for herself again
    item = _asked(make_item)
    services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)

    # When carol hands the bill back
    services.item_bill_return(item_id=item.pk, actor=Actor("carol"))

    # Then bob is told it came back to him; carol, who did it, is told nothing
    since = clock.now() - timedelta(days=1)
    assert [(e.outcome, e.by) for e in handover_news(user_id="bob", since=since, limit=5)] == [
        ("returned", "carol"),
        ("accepted", "carol"),
    ]
    assert handover_news(user_id="carol", since=since, limit=5) == []


def test_the_creator_taking_the_bill_back_himself_tells_no_one(make_item, clock):
    # Given bob's item whose bill carol accepted
    item = _asked(make_item)
    services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)
    # When bob ends the handover himself / Then only carol's acceptance is on record
    services.item_bill_return(item_id=item.pk, actor=Actor("bob"))
    assert list(HandoverEvent.objects.values_list("outcome", "told")) == [("accepted", "bob")]


def test_the_count_of_handovers_waiting_is_per_person(make_item):
    # Given two bills asked of carol, one of dave, and one carol already answered
    _asked(make_item, "One"), _asked(make_item, "Two"), _asked(make_item, "Three", to="dave")
    answered = _asked(make_item, "Four")
    services.item_handover_answer(item_id=answered.pk, actor=Actor("carol"), accept=False)
    # When the waiting handovers are counted / Then carol has two, dave one, bob and nobody none
    assert [pending_handover_count(user_id=u) for u in ("carol", "dave", "bob", "")] == [2, 1, 0, 0]


def test_the_addressee_s_dashboard_lists_what_waits_for_her_answer(make_item, api_client_for):
    # Given bob's item whose bill he asked carol to take over
    _asked(make_item, "Shared notes")

    # When carol opens her home page
    card = _card(api_client_for("carol").get("/", **HTML), "home-handovers")

    # Then it lists the item, who asks, and links to where she answers
    assert "Shared notes" in card
    assert "Bob Okafor asks you to pay for it" in card
    assert 'href="/my-resources#handovers"' in card


def test_the_header_counts_the_handovers_waiting_on_every_page(make_item, api_client_for):
    # Given two bills asked of carol
    _asked(make_item, "One"), _asked(make_item, "Two")

    # When carol and bob open a page other than home
    carols = api_client_for("carol").get("/notifications", **HTML).content.decode()
    bobs = api_client_for("bob").get("/notifications", **HTML).content.decode()

    # Then carol's header says two bills wait, linking to My resources; bob's says nothing
    badge = 'href="/my-resources#handovers" data-testid="handovers-waiting">2 bills to answer</a>'
    assert badge in carols
    assert 'data-testid="handovers-waiting"' not in bobs


def test_who_asked_reads_the_answers_on_his_dashboard(make_item, api_client_for):
    # Given bob's three items: carol accepted one, declined one, and handed the third back
    one, two, three = (
        _asked(make_item, "Accepted one"),
        _asked(make_item, "Declined one"),
        _asked(make_item, "Returned one"),
    )
    services.item_handover_answer(item_id=one.pk, actor=Actor("carol"), accept=True)
    services.item_handover_answer(item_id=two.pk, actor=Actor("carol"), accept=False)
    services.item_handover_answer(item_id=three.pk, actor=Actor("carol"), accept=True)
    services.item_bill_return(item_id=three.pk, actor=Actor("carol"))

    # When bob opens his home page
    card = _card(api_client_for("bob").get("/", **HTML), "home-handovers")

    # Then each answer is there, in words, linking to the item
    assert "Carol Nguyen accepted: they pay for it now" in card
    assert "Carol Nguyen declined: you still pay for it" in card
    assert "Carol Nguyen handed the bill back: you pay for it again" in card
    assert f'href="/a/notebook/items/{one.pk}"' in card


def test_old_answers_leave_the_dashboard(make_item, api_client_for, clock):
    # Given bob's item carol accepted, longer ago than the dashboard looks back
    item = _asked(make_item, "Long ago")
    services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)
    clock.advance(days=HANDOVER_NEWS_DAYS + 1)

    # When bob opens his home page / Then the handovers card is gone
    assert 'data-testid="home-handovers"' not in api_client_for("bob").get("/", **HTML).content.decode()
