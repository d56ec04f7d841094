"""Personal API tokens (issue 12.6): created, listed, revoked by their owner; stored hashed; sent
as `Authorization: Token` or `Bearer`; acting as their owner with the owner's rights now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from collab.models import ApiToken

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def _issue(client: APIClient, name: str = "backup script") -> dict:
    response = client.post("/me/tokens", {"name": name}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "token"])
def test_a_script_acts_as_the_tokens_owner(bob_api, scheme):
    # Given bob's token
    token = _issue(bob_api)["token"]
    # When a script sends it with no other identity
    response = APIClient().get("/me", HTTP_AUTHORIZATION=f"{scheme} {token}")
    # Then it is bob
    assert (response.status_code, response.json()["id"]) == (200, "bob")


def test_only_a_hash_of_the_token_is_stored(bob_api):
    # Given bob's new token
    issued = _issue(bob_api)
    # When the row is read
    row = ApiToken.objects.get(pk=issued["id"])
    # Then the token itself is nowhere in it, and the list never shows it
    assert issued["token"] not in {row.key_hash, row.prefix, row.name}
    assert issued["token"].startswith(row.prefix)
    assert "token" not in bob_api.get("/me/tokens").json()[0]


@pytest.mark.parametrize("header", ["Token wst_nope", "Bearer x", "Token ", "Bearer " + "a" * 500])
def test_an_unknown_token_is_401_and_never_falls_back_to_another_identity(header):
    # Given no such token; When a script sends it (in mock mode, where no header means the default user)
    response = APIClient().get("/me", HTTP_AUTHORIZATION=header)
    # Then it is refused rather than treated as the default person
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert "Bearer" in response["WWW-Authenticate"]


def test_a_revoked_token_is_refused(bob_api):
    # Given bob's token, revoked
    issued = _issue(bob_api)
    revoked = bob_api.delete(f"/me/tokens/{issued['id']}")
    # When a script uses it
    response = APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {issued['token']}")
    # Then it is 401
    assert revoked.json()["revoked_at"] is not None
    assert response.status_code == 401


def test_a_token_cannot_create_another_token_so_revoking_it_ends_what_it_could_do(bob_api):
    # Given bob's token, in the hands of a script (or of whoever stole it)
    issued = _issue(bob_api)
    script = APIClient()
    script.credentials(HTTP_AUTHORIZATION=f"Token {issued['token']}")
    # When the script asks for a new token, over the API and through the tokens page
    response = script.post("/me/tokens", {"name": "persistence"}, format="json")
    page = script.post("/me/tokens", {"name": "persistence"}, HTTP_ACCEPT="text/html")
    # Then it is refused, saying to sign in, and bob still has only his one token
    assert (response.status_code, response.json()["error"]) == (403, "token_cannot_create_tokens")
    assert page.status_code == 302
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["backup script"]
    # And the script may still list and revoke bob's tokens (cleaning up after itself)
    assert script.get("/me/tokens").status_code == 200
    assert script.delete(f"/me/tokens/{issued['id']}").status_code == 200


def test_someone_elses_token_cannot_be_listed_or_revoked(bob_api, api_client_for):
    # Given bob's token
    issued = _issue(bob_api)
    carol = api_client_for("carol")
    # When carol lists hers and tries to revoke bob's
    listed = carol.get("/me/tokens").json()
    revoke = carol.delete(f"/me/tokens/{issued['id']}")
    # Then she sees none and gets 404, and bob's token still works
    assert listed == []
    assert revoke.status_code == 404
    assert APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {issued['token']}").status_code == 200


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 101}, {"name": ["a"]}])
def test_a_token_needs_a_name_and_a_bad_body_stores_nothing(bob_api, body):
    # Given bob; When he asks for a token with a bad name
    response = bob_api.post("/me/tokens", body, format="json")
    # Then it is 400 and nothing is stored
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_a_token_request_needs_no_csrf_token_but_carries_no_cookie_identity(bob_api):
    # Given bob's token and a client that enforces CSRF like a browser
    token = _issue(bob_api)["token"]
    client = APIClient(enforce_csrf_checks=True)
    # When a script posts with the token
    response = client.post("/notifications/read-all", HTTP_AUTHORIZATION=f"Token {token}")
    # Then it works: a cross-site form cannot send an Authorization header
    assert response.status_code == 200


def test_a_token_carries_its_owners_rights_at_the_moment_of_use(settings, api_client_for):
    # Given carol's token while she is staff
    settings.WORKSPACE_MOCK_STAFF = ["carol"]
    token = _issue(api_client_for("carol"))["token"]
    staff_answer = APIClient().get("/admin/user-resources", HTTP_AUTHORIZATION=f"Token {token}").status_code
    # When she stops being staff and the script asks again
    settings.WORKSPACE_MOCK_STAFF = []
    answer = APIClient().get("/admin/user-resources", HTTP_AUTHORIZATION=f"Token {token}").status_code
    # Then the staff-only endpoint is hidden from her now
    assert staff_answer == 200
    assert answer == 404


def test_last_use_is_recorded_at_most_once_a_minute(bob_api, clock, django_assert_max_num_queries):
    # Given bob's token used once
    token = _issue(bob_api)["token"]
    APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {token}")
    first = ApiToken.objects.get().last_used_at
    # When it is used again within the minute, then after it
    with django_assert_max_num_queries(1):
        APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {token}")
    unchanged = ApiToken.objects.get().last_used_at
    clock.advance(seconds=61)
    APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {token}")
    # Then only the later use moves it
    assert first is not None
    assert unchanged == first
    assert ApiToken.objects.get().last_used_at == first + timedelta(seconds=61)


def test_the_tokens_page_shows_a_new_token_once_after_the_redirect(client: Client):
    # Given bob on the tokens page; When he creates a token
    created = client.post("/me/tokens", {"name": "laptop"}, HTTP_X_USER_ID="bob", **HTML)
    shown = client.get(created["Location"], HTTP_X_USER_ID="bob", **HTML)
    again = client.get("/me/tokens", HTTP_X_USER_ID="bob", **HTML)
    token_prefix = ApiToken.objects.get().prefix
    # Then the POST answers with a redirect (nothing to create again on reload), the page after it
    # shows the token, uncached, and the next visit lists it without the token
    assert created.status_code == 302
    assert 'data-testid="token-value"' in shown.content.decode()
    assert shown["Cache-Control"] == "no-store"
    assert 'data-testid="token-value"' not in again.content.decode()
    assert token_prefix in again.content.decode()


def test_reloading_the_page_after_creating_a_token_creates_no_second_one(client: Client):
    # Given bob, who created a token and was redirected to the list
    client.post("/me/tokens", {"name": "laptop"}, HTTP_X_USER_ID="bob", follow=True, **HTML)
    # When he reloads the page twice
    for _ in range(2):
        client.get("/me/tokens", HTTP_X_USER_ID="bob", **HTML)
    # Then he has one token
    assert ApiToken.objects.count() == 1


def test_a_token_name_the_service_refuses_creates_nothing_and_says_why(client: Client):
    # Given bob on the tokens page; When he creates a token with an empty name
    response = client.post("/me/tokens", {"name": "  "}, HTTP_X_USER_ID="bob", follow=True, **HTML)
    # Then nothing is stored, no token is shown, and the page says why
    assert ApiToken.objects.count() == 0
    assert 'data-testid="token-value"' not in response.content.decode()
    assert "A token needs a name of 1 to 100 characters." in response.content.decode()


def test_the_tokens_page_revokes(client: Client, bob_api):
    # Given bob's token; When he revokes it from the page
    issued = _issue(bob_api)
    response = client.post(f"/me/tokens/{issued['id']}", HTTP_X_USER_ID="bob", follow=True, **HTML)
    # Then it is revoked and the page says so
    assert "Revoked backup script" in response.content.decode()
    assert ApiToken.objects.get().revoked_at is not None


def test_staff_create_their_own_token_in_admin_and_see_it_once(admin_client):
    # Given staff in admin; When they add a token
    response = admin_client.post("/admin/collab/apitoken/add/", {"name": "ops"})
    row = ApiToken.objects.get()
    # Then the answer shows it once, and it is theirs
    assert response.status_code == 200
    assert row.prefix in response.content.decode()
    assert row.created_by == "admin"


def test_staff_revoke_any_token_in_admin(admin_client, bob_api):
    # Given bob's token; When staff revoke it with the admin action
    issued = _issue(bob_api)
    admin_client.post("/admin/collab/apitoken/", {"action": "revoke", "_selected_action": [issued["id"]]}, follow=True)
    # Then it no longer works
    assert APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {issued['token']}").status_code == 401


def test_in_django_mode_a_deactivated_owners_token_stops_working(settings):
    # Given a Django user with a token, in production identity mode
    settings.WORKSPACE_USER_DIRECTORY = "collab.identity.DjangoUserDirectory"
    settings.WORKSPACE_CURRENT_USER_PROVIDER = "collab.identity.RequestUserProvider"
    user = get_user_model().objects.create_user("erin", password="long-enough-pass")
    client = APIClient()
    client.force_login(user)
    token = client.post("/me/tokens", {"name": "ci"}, format="json").json()["token"]
    works = APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {token}").status_code
    # When erin is deactivated
    user.is_active = False
    user.save()
    # Then her token is refused
    assert works == 200
    assert APIClient().get("/me", HTTP_AUTHORIZATION=f"Token {token}").status_code == 401
