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
    response = APIClient().get("/me")

    assert response.status_code == 200
    assert response.json() == {
        "id": "alice",
        "name": "Alice Martin",
        "section": "Operations",
        "email": "alice@example.com",
        "photo_url": None,
    }


def test_x_user_id_header_picks_the_user_for_one_request(bob_api: APIClient) -> None:
    assert bob_api.get("/me").json()["id"] == "bob"
    assert APIClient().get("/me").json()["id"] == "alice"


def test_switching_the_mock_provider_changes_me_between_requests(acting_as) -> None:
    client = APIClient()
    acting_as("carol")
    first = client.get("/me").json()["id"]
    acting_as("dave")
    second = client.get("/me").json()["id"]

    assert (first, second) == ("carol", "dave")


def test_unknown_x_user_id_is_refused_with_401() -> None:
    response = APIClient().get("/me", HTTP_X_USER_ID="mallory")

    assert response.status_code == 401
    assert response.json()["error"] == "unknown_user"
    assert "mallory" in response.json()["detail"]


def test_users_lists_the_whole_directory(alice_api: APIClient) -> None:
    response = alice_api.get("/users")

    assert response.status_code == 200
    assert [user["id"] for user in response.json()] == ["alice", "bob", "carol", "dave"]
    assert set(response.json()[0]) == {"id", "name", "section", "email", "photo_url"}


@PRODUCTION_IDENTITY
def test_anonymous_api_call_gets_401_json_outside_mock_mode(db) -> None:
    response = APIClient().get("/me")

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert response.json()["detail"]


@PRODUCTION_IDENTITY
def test_x_user_id_header_is_ignored_outside_mock_mode(db) -> None:
    response = APIClient().get("/me", HTTP_X_USER_ID="alice")

    assert response.status_code == 401


@PRODUCTION_IDENTITY
def test_basic_credentials_identify_a_django_user(bob_account) -> None:
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "s3cret-pass"))

    assert response.status_code == 200
    assert response.json()["id"] == "bob"
    assert response.json()["name"] == "Bob"


@PRODUCTION_IDENTITY
def test_wrong_basic_password_gets_401(bob_account) -> None:
    response = APIClient().get("/me", HTTP_AUTHORIZATION=basic("bob", "wrong"))

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_credentials"


@PRODUCTION_IDENTITY
def test_session_login_identifies_pages_and_api(bob_account, client) -> None:
    # Through the login page, as a person signs in (the password check sees the request).
    client.post("/accounts/login/", {"username": "bob", "password": "s3cret-pass"})

    assert client.get("/me").json()["id"] == "bob"
    assert client.get("/", HTTP_ACCEPT="text/html").status_code == 200


@PRODUCTION_IDENTITY
def test_session_identity_needs_a_csrf_token_to_write_through_the_api(bob_account) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(bob_account)

    response = client.post("/notifications/read-all")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@PRODUCTION_IDENTITY
def test_anonymous_page_visit_redirects_to_login_outside_mock_mode(client, db) -> None:
    response = client.get("/notifications", HTTP_ACCEPT="text/html")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/notifications"


def test_mock_identity_is_refused_without_debug_or_the_allow_flag() -> None:
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_ALLOW_MOCK_IDENTITY=1"):
        check_mock_identity_allowed(
            debug=False,
            allow_flag=False,
            directory_path="collab.identity.MockDirectory",
            provider_path="collab.identity.MockUserProvider",
        )


def test_mock_identity_is_accepted_with_the_allow_flag() -> None:
    check_mock_identity_allowed(
        debug=False,
        allow_flag=True,
        directory_path="collab.identity.MockDirectory",
        provider_path="collab.identity.MockUserProvider",
    )


def test_real_identity_needs_no_flag() -> None:
    check_mock_identity_allowed(
        debug=False,
        allow_flag=False,
        directory_path="collab.identity.DjangoUserDirectory",
        provider_path="collab.identity.RequestUserProvider",
    )


def test_service_refuses_to_start_with_mock_identity_and_debug_off() -> None:
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "test-secret", "WORKSPACE_ALLOW_MOCK_IDENTITY": ""}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode != 0
    assert "Mock identity" in result.stderr
    assert "WORKSPACE_MOCK_IDENTITY=0" in result.stderr


def test_request_provider_reads_the_id_bound_for_the_request() -> None:
    provider = RequestUserProvider()
    token = bind_request_user("carol")
    try:
        assert provider.current_user_id() == "carol"
    finally:
        unbind_request_user(token)
    assert provider.current_user_id() is None


def test_django_directory_lists_active_users_by_username(db) -> None:
    accounts = get_user_model().objects
    accounts.create_user("zoe", first_name="Zoe", last_name="Park", email="zoe@example.com")
    accounts.create_user("gone", is_active=False)

    users = DjangoUserDirectory().all()

    assert [user.id for user in users] == ["zoe"]
    assert users[0].name == "Zoe Park"
    assert DjangoUserDirectory().get("gone") is None


def test_user_switcher_remembers_the_choice_in_the_session(client, db) -> None:
    response = client.post("/switch-user", {"user_id": "bob", "next": "/notifications"})

    assert response.status_code == 302
    assert response["Location"] == "/notifications"
    assert client.get("/me").json()["id"] == "bob"


def test_user_switcher_refuses_someone_not_in_the_directory(client, db) -> None:
    client.post("/switch-user", {"user_id": "mallory"})

    assert client.get("/me").json()["id"] == "alice"


@PRODUCTION_IDENTITY
def test_user_switcher_does_not_exist_outside_mock_mode(client, db) -> None:
    assert client.post("/switch-user", {"user_id": "bob"}).status_code == 404
