"""Identity: the injected directory and provider, `/me`, `/users`, and mock-mode rules."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from collab.identity import (
    DjangoUserDirectory,
    RequestUserProvider,
    bind_request_user,
    check_mock_identity_allowed,
    unbind_request_user,
)

PRODUCTION_IDENTITY = override_settings(
    WORKSPACE_USER_DIRECTORY="collab.identity.DjangoUserDirectory",
    WORKSPACE_CURRENT_USER_PROVIDER="collab.identity.RequestUserProvider",
)
REPO = Path(__file__).resolve().parents[2]


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.fixture
def bob_account(db):
    return get_user_model().objects.create_user("bob", "bob@example.com", "s3cret-pass", first_name="Bob")


def test_me_returns_the_mock_default_user() -> None:
    # Given mock identity and a request that names nobody
    # When it asks who it is
    response = APIClient().get("/me")

    # Then it is alice, the mock default user, with her directory entry
    assert response.status_code == 200
    assert response.json() == {
        "id": "alice",
        "name": "Alice Martin",
        "section": "Operations",
        "email": "alice@example.com",
        "photo_url": None,
    }


def test_x_user_id_header_picks_the_user_for_one_request(bob_api: APIClient) -> None:
    # Given mock identity
    # When a request sends X-User-Id bob / Then it is bob
    assert bob_api.get("/me").json()["id"] == "bob"
    # When the next request sends no header / Then it is alice again
    assert APIClient().get("/me").json()["id"] == "alice"


def test_switching_the_mock_provider_changes_me_between_requests(acting_as) -> None:
    # Given one client of the mock provider
    client = APIClient()
    # When the provider switches to carol, then to dave, between two requests
    acting_as("carol")
    first = client.get("/me").json()["id"]
    acting_as("dave")
    second = client.get("/me").json()["id"]

    # Then each request is the user chosen before it
    assert (first, second) == ("carol", "dave")


def test_unknown_x_user_id_is_refused_with_401() -> None:
    # Given mock identity
    # When a request names mallory, who is not in the directory
    response = APIClient().get("/me", HTTP_X_USER_ID="mallory")

    # Then it is 401 unknown_user naming her
    assert response.status_code == 401
    assert response.json()["error"] == "unknown_user"
    assert "mallory" in response.json()["detail"]


def test_users_lists_the_whole_directory(alice_api: APIClient) -> None:
    # Given mock identity
    # When alice lists the users
    response = alice_api.get("/users")

    # Then the whole directory comes back by id, each with the fields of a person
    assert response.status_code == 200
    assert [user["id"] for user in response.json()] == ["alice", "bob", "carol", "dave"]
    assert set(response.json()[0]) == {"id", "name", "section", "email", "photo_url"}


@PRODUCTION_IDENTITY
def test_anonymous_api_call_gets_401_json_outside_mock_mode(db) -> None:
    # Given real identity
    # When a request with no credentials calls the API
    response = APIClient().get("/me")

    # Then it is 401 not_authenticated in JSON with a detail
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert response.json()["detail"]


@PRODUCTION_IDENTITY
def test_x_user_id_header_is_ignored_outside_mock_mode(db) -> None:
    # Given real identity
    # When a request names alice with X-User-Id only
    response = APIClient().get("/me", HTTP_X_USER_ID="alice")

    # Then the header counts for nothing and it is 401
    assert response.status_code == 401


@PRODUCTION_IDENTITY
def test_basic_credentials_identify_a_django_user(bob_account) -> None:
    # Given real identity and bob's account
    # When a request sends his username and password as HTTP Basic
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "s3cret-pass"))

    # Then it is bob, named from his account
    assert response.status_code == 200
    assert response.json()["id"] == "bob"
    assert response.json()["name"] == "Bob"


@PRODUCTION_IDENTITY
def test_wrong_basic_password_gets_401(bob_account) -> None:
    # Given real identity and bob's account
    # When a request sends his username with a wrong password
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "wrong"))

    # Then it is 401 invalid_credentials
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_credentials"


def test_in_mock_mode_basic_credentials_identify_their_account(bob_account) -> None:
    # Given mock identity (the demo) and bob's account
    # When a request sends his username and password as HTTP Basic
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "s3cret-pass"))

    # Then it is bob, not the default person
    assert response.status_code == 200
    assert response.json()["id"] == "bob"


def test_in_mock_mode_a_wrong_basic_password_gets_401_not_the_default_person(bob_account) -> None:
    # Given mock identity (the demo), where a request naming nobody is alice
    # When a request sends bob's username with a wrong password
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "wrong"))

    # Then it is refused 401, with the challenge, rather than answered as alice
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_credentials"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Basic", "Basic ", "Basic\t" + basic("bob", "wrong").split()[1], "Digest username=bob", "Negotiate xyz"],
)
def test_in_mock_mode_an_authorization_header_that_fails_gets_401_not_the_default_person(bob_account, header) -> None:
    # Given mock identity (the demo), where a request naming nobody is alice
    # When a request sends an Authorization header that is empty, wrong or of a scheme not taken
    response = APIClient().get("/me", HTTP_AUTHORIZATION=header)

    # Then it is refused 401 invalid_credentials, never answered as alice
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_credentials"


def test_in_mock_mode_basic_after_a_tab_identifies_its_account(bob_account) -> None:
    # Given mock identity and bob's account
    # When his right credentials follow the scheme after a tab
    response = APIClient().get("/me", HTTP_AUTHORIZATION="Basic\t" + basic("bob", "s3cret-pass").split()[1])

    # Then it is bob
    assert (response.status_code, response.json()["id"]) == (200, "bob")


def test_in_mock_mode_staff_through_basic_is_the_demos_staff_list_not_the_accounts_flag(bob_account, settings) -> None:
    # Given mock identity with only alice on the staff list, and bob's account flagged staff
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    bob_account.is_staff = True
    bob_account.save()

    # When bob asks for a staff-only page of the API with Basic
    response = APIClient().get("/admin/user-resources/carol", HTTP_AUTHORIZATION=basic("bob", "s3cret-pass"))

    # Then he is not staff there, as with X-User-Id
    assert response.status_code == 404


def test_in_mock_mode_basic_for_an_account_outside_the_directory_gets_401(db) -> None:
    # Given mock identity and an account the mock directory does not list
    get_user_model().objects.create_user("zed", password="s3cret-pass")

    # When it signs in with Basic
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("zed", "s3cret-pass"))

    # Then it is refused 401 unknown_user, saying why
    assert response.status_code == 401
    assert response.json()["error"] == "unknown_user"
    assert "not in the user directory" in response.json()["detail"]


@PRODUCTION_IDENTITY
def test_session_login_identifies_pages_and_api(bob_account, client) -> None:
    # Given real identity and bob's account
    # When bob signs in through the login page, as a person does (the password check sees the request)
    client.post("/accounts/login/", {"username": "bob", "password": "s3cret-pass"})

    # Then the session is bob for the API and opens the pages
    assert client.get("/me").json()["id"] == "bob"
    assert client.get("/", HTTP_ACCEPT="text/html").status_code == 200


@PRODUCTION_IDENTITY
def test_session_identity_needs_a_csrf_token_to_write_through_the_api(bob_account) -> None:
    # Given real identity and bob signed in with a session on a client that checks CSRF
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(bob_account)

    # When he writes through the API without a CSRF token
    response = client.post("/notifications/read-all")

    # Then it is 403 naming CSRF
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@PRODUCTION_IDENTITY
def test_anonymous_page_visit_redirects_to_login_outside_mock_mode(client, db) -> None:
    # Given real identity and nobody signed in
    # When a page is opened
    response = client.get("/notifications", HTTP_ACCEPT="text/html")

    # Then it redirects to the login page, coming back afterwards
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/notifications"


def test_mock_identity_is_refused_without_debug_or_the_allow_flag() -> None:
    # Given debug off, no allow flag and the mock directory and provider
    # When the identity settings are checked / Then they are refused, naming the flag that allows them
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_ALLOW_MOCK_IDENTITY=1"):
        check_mock_identity_allowed(
            debug=False,
            allow_flag=False,
            directory_path="collab.identity.MockDirectory",
            provider_path="collab.identity.MockUserProvider",
        )


def test_mock_identity_is_accepted_with_the_allow_flag() -> None:
    # Given debug off and the mock directory and provider
    # When the identity settings are checked with the allow flag / Then they pass without an error
    check_mock_identity_allowed(
        debug=False,
        allow_flag=True,
        directory_path="collab.identity.MockDirectory",
        provider_path="collab.identity.MockUserProvider",
    )


def test_real_identity_needs_no_flag() -> None:
    # Given debug off, no allow flag and the Django directory and request provider
    # When the identity settings are checked / Then they pass without an error
    check_mock_identity_allowed(
        debug=False,
        allow_flag=False,
        directory_path="collab.identity.DjangoUserDirectory",
        provider_path="collab.identity.RequestUserProvider",
    )


def test_service_refuses_to_start_with_mock_identity_and_debug_off() -> None:
    # Given debug off, no allow flag and the shipped mock identity
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "test-secret", "WORKSPACE_ALLOW_MOCK_IDENTITY": ""}
    # When the service's checks run in a fresh process
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )

    # Then they fail, saying how to turn mock identity off
    assert result.returncode != 0
    assert "Mock identity" in result.stderr
    assert "WORKSPACE_MOCK_IDENTITY=0" in result.stderr


def test_request_provider_reads_the_id_bound_for_the_request() -> None:
    # Given the request provider and carol bound for the current request
    provider = RequestUserProvider()
    token = bind_request_user("carol")
    try:
        # When it is asked who the user is / Then it is carol
        assert provider.current_user_id() == "carol"
    finally:
        unbind_request_user(token)
    # When the binding is undone / Then there is no user
    assert provider.current_user_id() is None


def test_django_directory_lists_active_users_by_username(db) -> None:
    # Given an active account zoe and an inactive account gone
    accounts = get_user_model().objects
    accounts.create_user("zoe", first_name="Zoe", last_name="Park", email="zoe@example.com")
    accounts.create_user("gone", is_active=False)

    # When the Django directory lists its users
    users = DjangoUserDirectory().all()

    # Then only zoe is listed, by username with her full name, and gone cannot be looked up
    assert [user.id for user in users] == ["zoe"]
    assert users[0].name == "Zoe Park"
    assert DjangoUserDirectory().get("gone") is None


def test_user_switcher_remembers_the_choice_in_the_session(client, db) -> None:
    # Given mock identity
    # When the user switcher chooses bob and a page to go back to
    response = client.post("/switch-user", {"user_id": "bob", "next": "/notifications"})

    # Then it redirects there and the session stays bob
    assert response.status_code == 302
    assert response["Location"] == "/notifications"
    assert client.get("/me").json()["id"] == "bob"


def test_user_switcher_refuses_someone_not_in_the_directory(client, db) -> None:
    # Given mock identity
    # When the user switcher chooses mallory, who is not in the directory
    client.post("/switch-user", {"user_id": "mallory"})

    # Then the session stays alice
    assert client.get("/me").json()["id"] == "alice"


@PRODUCTION_IDENTITY
def test_user_switcher_does_not_exist_outside_mock_mode(client, db) -> None:
    # Given real identity
    # When the user switcher is posted to / Then it does not exist
    assert client.post("/switch-user", {"user_id": "bob"}).status_code == 404
