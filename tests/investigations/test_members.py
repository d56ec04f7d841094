"""Members are added by the investigation's owner (its creator) or staff, and by nobody else
(issue 25.7): a member may run commands billed to the owner, so a member cannot bring anyone in."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from workspace.investigations.access import InvestigationRight, investigation_for, investigation_rights
from workspace.investigations.models import Investigation, InvestigationMember

pytestmark = pytest.mark.django_db


def _add(api, investigation: Investigation, user_ids: object):
    return api.post(f"/investigations/{investigation.pk}/members", {"user_ids": user_ids}, format="json")


def _members() -> list[str]:
    return sorted(InvestigationMember.objects.values_list("user_id", flat=True))


def test_the_owner_adds_a_member_who_can_then_open_it(alice_api, carol_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()
    # When she adds carol
    response = _add(alice_api, investigation, ["carol"])
    # Then carol is a member and opens it
    assert (response.status_code, response.json()["members"]) == (200, ["carol"])
    assert carol_api.get(f"/investigations/{investigation.pk}").status_code == 200


def test_staff_add_members_to_anyones_investigation(settings, api_client_for, make_investigation):
    # Given alice's investigation and dave, staff but no member
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    investigation = make_investigation()
    # When dave adds carol
    response = _add(api_client_for("dave"), investigation, ["carol"])
    # Then carol is a member
    assert (response.status_code, _members()) == (200, ["carol"])


def test_staff_who_add_members_can_open_the_investigation_too(settings, api_client_for, make_investigation):
    # Given alice's investigation and dave, staff but no member
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    investigation = make_investigation()
    dave = api_client_for("dave")

    # When dave adds carol, then opens the investigation through the API and as a page
    added = _add(dave, investigation, ["carol"])
    api = dave.get(f"/investigations/{investigation.pk}")
    page = dave.get(f"/investigations/{investigation.pk}", HTTP_ACCEPT="text/html")

    # Then each is allowed, and the page offers the add form: who may add members sees what they add them to
    assert (added.status_code, api.status_code, page.status_code) == (200, 200, 200)
    assert b'data-testid="members-add"' in page.content


def test_staff_get_the_same_answer_for_one_investigation_and_for_many(make_investigation):
    # Given alice's investigation and staff who are no member of it
    investigation = make_investigation()
    staff = Actor("dave", is_staff=True)

    # When staff ask for it to use it, to own it, and among many
    used = investigation_for(investigation.pk, actor=staff)
    owned = investigation_for(investigation.pk, actor=staff, need=InvestigationRight.OWN)
    rights = investigation_rights([investigation], actor=staff)

    # Then every answer says they may do all an owner may
    assert used.pk == owned.pk == investigation.pk
    assert rights == {investigation.pk: InvestigationRight.OWN}


def test_a_member_cannot_add_members(bob_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))
    # When bob adds dave
    response = _add(bob_api, investigation, ["dave"])
    # Then it is 403 owner_only naming alice, and bob is still the only member
    assert (response.status_code, response.json()["error"]) == (403, "owner_only")
    assert "alice" in response.json()["detail"]
    assert _members() == ["bob"]


def test_a_stranger_gets_404_and_learns_nothing_from_a_bad_body(carol_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()
    # When carol, a stranger, adds herself, or sends a body that is no list
    # Then both are 404, and nobody is added
    assert _add(carol_api, investigation, ["carol"]).status_code == 404
    assert _add(carol_api, investigation, "carol").status_code == 404
    assert _members() == []


@pytest.mark.parametrize("user_ids", ["bob", None, [], [""], ["bob", "zed"]])
def test_a_bad_list_is_400_and_nobody_is_added(alice_api, make_investigation, user_ids):
    # Given alice's investigation
    investigation = make_investigation()
    # When she adds no list, an empty one, a blank id, or bob with zed, who is not in the directory
    response = _add(alice_api, investigation, user_ids)
    # Then it is 400 and nobody is added, bob included
    assert response.status_code == 400
    assert _members() == []


def test_adding_more_than_200_people_at_once_is_400_and_nobody_is_added(alice_api, make_investigation):
    # Given alice's investigation
    investigation = make_investigation()
    # When she adds bob named 201 times (each name a directory lookup: a query each with Django users)
    response = _add(alice_api, investigation, ["bob"] * 201)
    # Then it is a 400 saying the bound, and nobody is added
    assert (response.status_code, response.json()["error"]) == (400, "validation_error")
    assert "200" in response.json()["detail"]
    assert _members() == []


def test_adding_someone_already_in_changes_nothing(alice_api, make_investigation):
    # Given alice's investigation with bob as member
    investigation = make_investigation(members=("bob",))
    # When she adds bob again, and herself
    response = _add(alice_api, investigation, ["bob", "alice"])
    # Then bob is the one member, once
    assert (response.status_code, _members()) == (200, ["bob"])
