"""A mentioned non-member's landing: still the investigation's 404, with what her notification told
her (who mentioned her, to ask them to add her); anyone never mentioned there gets the plain 404."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from collab.selectors import mention_leading_to
from collab.services import notify
from workspace.investigations import services

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Runs what a service queues for after commit (its notifications), as a request would."""
    return django_capture_on_commit_callbacks


def _error_card(response) -> str:
    """The error page's card alone: the header's user switcher lists everyone in mock mode."""
    html = response.content.decode()
    start = html.index('data-testid="error-page"')
    return html[start : html.index("</section>", start)]


def test_the_latest_mention_leading_to_a_page_is_found_and_no_other_kind(make_investigation, committed):
    # Given alice's investigation where she mentioned carol twice, and a status notice to dave there
    investigation = make_investigation(title="Disk alerts")
    link = f"/investigations/{investigation.pk}"
    with committed(execute=True):
        services.mention_create(investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"], note="one")
    with committed(execute=True):
        services.mention_create(investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"], note="two")
    with committed(execute=True):
        notify(["dave"], "status", title="Disk alerts is now closed", link=link, actor="alice")

    # When the mention leading there is looked up for carol, for dave and for carol elsewhere
    # Then carol's is the latest, named for display; dave's status notice and other links are none
    found = mention_leading_to(user_id="carol", link=link)
    assert found is not None
    assert (found["body"], found["actor_name"], found["href"]) == ("two", "Alice Martin", link)
    assert mention_leading_to(user_id="dave", link=link) is None
    assert mention_leading_to(user_id="carol", link=f"{link}0") is None


def test_a_mentioned_non_member_lands_on_a_404_that_tells_her_whom_to_ask(carol_api, make_investigation, committed):
    # Given alice's investigation Disk alerts, where she mentioned carol with a note
    investigation = make_investigation(title="Disk alerts", members=("bob",))
    with committed(execute=True):
        services.mention_create(
            investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"], note="look at node 4"
        )

    # When carol follows her notification's link
    response = carol_api.get(f"/investigations/{investigation.pk}", **HTML)

    # Then it is still a 404, which names who mentioned her and tells her to ask alice to add her
    page = _error_card(response)
    assert response.status_code == 404
    assert "You were mentioned here" in page
    assert "“Alice Martin mentioned you in Disk alerts”" in page
    assert "Ask Alice Martin to add you as a member" in page
    # ...and shows nothing her notification did not: no note, no members, no conversation
    assert "look at node 4" not in page
    assert "bob" not in page
    assert 'data-testid="members"' not in page


def test_a_mention_by_the_agent_lands_on_a_404_that_says_who_to_ask(carol_api, make_investigation, committed):
    # Given alice's investigation, where the agent mentioned carol, asked by alice
    investigation = make_investigation(title="Disk alerts")
    with committed(execute=True):
        services.mention_create_by_agent(investigation_id=investigation.pk, user_ids=["carol"], asked_by="alice")

    # When carol follows her notification's link
    response = carol_api.get(f"/investigations/{investigation.pk}", **HTML)

    # Then the 404 says the agent mentioned her, quoting her notification, which names alice
    page = _error_card(response)
    assert response.status_code == 404
    assert "“The agent mentioned you in Disk alerts, asked by Alice Martin”" in page
    assert "Ask the person who asked the agent to mention you to add you as a member" in page


def test_a_stranger_never_mentioned_there_sees_the_plain_404(carol_api, make_investigation, committed):
    # Given alice's investigation A, where she mentioned carol, and her investigation B, where she did not
    mentioned = make_investigation(title="Disk alerts")
    other = make_investigation(title="Secret outage")
    with committed(execute=True):
        services.mention_create(investigation_id=mentioned.pk, actor=Actor("alice"), user_ids=["carol"])

    # When carol opens B, and a path with no investigation at all
    for path in (f"/investigations/{other.pk}", "/investigations/999999"):
        response = carol_api.get(path, **HTML)
        page = _error_card(response)

        # Then each is the site's plain 404, naming no one and nothing
        assert response.status_code == 404
        assert "There is nothing at" in page
        assert "mentioned you" not in page
        assert "Secret outage" not in page
        assert "alice" not in page.lower()


def test_the_api_stays_a_plain_404_for_a_mentioned_non_member(carol_api, make_investigation, committed):
    # Given alice's investigation, where she mentioned carol
    investigation = make_investigation(title="Disk alerts")
    with committed(execute=True):
        services.mention_create(investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"])

    # When carol's API client reads it
    response = carol_api.get(f"/investigations/{investigation.pk}")

    # Then it is the API's 404, with nothing of the mention
    assert response.status_code == 404
    assert "mentioned" not in response.content.decode()


def test_once_added_the_mentioned_person_opens_the_investigation(carol_api, make_investigation):
    # Given alice's investigation, where she mentioned carol, who alice then added as a member
    investigation = make_investigation(title="Disk alerts")
    services.mention_create(investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"])
    services.members_add(investigation_id=investigation.pk, actor=Actor("alice"), user_ids=["carol"])

    # When carol follows the link / Then the investigation opens
    response = carol_api.get(f"/investigations/{investigation.pk}", **HTML)
    assert response.status_code == 200
    assert 'data-testid="members">carol<' in response.content.decode()


def test_only_the_owner_s_picker_offers_to_add_a_non_member(alice_api, bob_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))

    # When alice and bob open its page
    owners = alice_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()
    members = bob_api.get(f"/investigations/{investigation.pk}", **HTML).content.decode()

    # Then alice's picker has the button that adds through the members endpoint; bob's has none
    url = f'data-url="/investigations/{investigation.pk}/members" data-testid="mention-add-members"'
    assert url in owners
    assert 'data-testid="mention-add-members"' not in members
