"""One page per investigation: `/investigations/<id>` is its place; its item's page sends a browser
there, keeps its terminal and files (opened with `folder`), and stays the payer's and the API's."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from workspace.items import services as item_services
from workspace.items.access import item_links
from workspace.items.models import Item

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def test_the_item_page_of_an_investigation_sends_a_member_to_the_investigation(bob_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))

    # When bob opens its item's page in a browser
    response = bob_api.get(f"/a/rca/items/{investigation.pk}", **HTML)

    # Then he is sent to the investigation's page
    assert response.status_code == 302
    assert response["Location"] == f"/investigations/{investigation.pk}"


def test_the_terminal_and_files_stay_on_the_item_page_and_link_back(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(title="Disk alerts")

    # When she follows its page's "Terminal and files" link
    page = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    assert f'href="/a/rca/items/{investigation.pk}?folder=" data-testid="terminal-and-files"' in page
    response = alice_api.get(f"/a/rca/items/{investigation.pk}?folder=", **HTML)

    # Then the item page opens, with the shell, and a link back to the investigation's page
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="shell"' in body
    assert f'href="/investigations/{investigation.pk}" data-testid="own-page"' in body


def test_a_form_on_the_item_page_of_an_investigation_comes_back_to_that_page(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(title="Disk alerts")

    # When she renames it with the item page's details form
    response = alice_api.post(f"/a/rca/items/{investigation.pk}", {"title": "Disk alerts, node 4"}, **HTML)

    # Then she comes back to the item page (its files), not to the investigation's
    assert response.status_code == 302
    assert response["Location"] == f"/a/rca/items/{investigation.pk}?folder="


def test_who_only_pays_for_an_investigation_keeps_its_item_page(make_investigation, api_client_for):
    # Given alice's investigation, whose bill carol accepted, carol being no member
    investigation = make_investigation(title="Disk alerts")
    item = Item.objects.get(pk=investigation.pk)
    item_services.item_update(item=item, actor=Actor("alice"), payer="carol")
    item_services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)

    # When carol opens its item page, and its investigation page
    carol = api_client_for("carol")
    response = carol.get(f"/a/rca/items/{investigation.pk}", **HTML)

    # Then the item page opens for her (to free its disk), without the link to the investigation's,
    # which stays a 404 to her
    assert response.status_code == 200
    assert 'data-testid="own-page"' not in response.content.decode()
    assert carol.get(f"/investigations/{investigation.pk}", **HTML).status_code == 404


def test_a_stranger_is_not_sent_anywhere(carol_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()
    # When carol, a stranger, opens its item page / Then it is the 404, no redirect that would tell it exists
    assert carol_api.get(f"/a/rca/items/{investigation.pk}", **HTML).status_code == 404


def test_the_item_api_of_an_investigation_is_unchanged(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation(title="Disk alerts")
    # When a program reads its item / Then it gets the item as JSON, as before
    response = alice_api.get(f"/a/rca/items/{investigation.pk}")
    assert response.status_code == 200
    assert response.json()["title"] == "Disk alerts"


def test_a_notebook_s_item_page_is_still_its_own_place(alice_api, make_item):
    # Given alice's notebook / When she opens its page / Then it opens, no redirect
    item = make_item()
    assert alice_api.get(f"/a/notebook/items/{item.pk}", **HTML).status_code == 200


def test_my_resources_links_an_investigation_to_its_files_for_its_user_and_its_payer(make_investigation):
    # Given alice's investigation, whose bill carol accepted
    investigation = make_investigation(title="Disk alerts")
    item = Item.objects.get(pk=investigation.pk)
    item_services.item_update(item=item, actor=Actor("alice"), payer="carol")
    item_services.item_handover_answer(item_id=item.pk, actor=Actor("carol"), accept=True)

    # When its links are made for alice and for carol (My resources, where disk is freed)
    links = [item_links([str(item.pk)], actor=Actor(user))[str(item.pk)].url for user in ("alice", "carol")]

    # Then both open its files on the item page, which sends neither of them elsewhere
    assert links == [f"/a/rca/items/{item.pk}?folder="] * 2
