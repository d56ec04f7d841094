"""Password guessing is throttled before any hash: HTTP Basic and the login page answer 429 with
Retry-After after a few wrong passwords, per username and per address (django-axes); below the
limit the right password works."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.collab.test_identity import PRODUCTION_IDENTITY, basic

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob_account(settings):
    settings.AXES_FAILURE_LIMIT = 3
    return get_user_model().objects.create_user("bob", password="s3cret-pass")


def _me(password: str, address: str = "10.0.0.1"):
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=basic("bob", password))
    return client.get("/me")


@PRODUCTION_IDENTITY
def test_basic_auth_is_locked_after_a_few_wrong_passwords(bob_account):
    # Given three wrong passwords for bob (the third reaches the limit)
    statuses = [_me("guess").status_code for _ in range(3)]
    # When a fourth try comes, even with the right password
    locked = _me("s3cret-pass")
    # Then it is refused with 429 and a Retry-After, in JSON, without checking the password
    assert statuses == [401, 401, 429]
    assert locked.status_code == 429
    assert locked.json()["error"] == "too_many_attempts"
    assert int(locked["Retry-After"]) > 0


@PRODUCTION_IDENTITY
def test_guessing_from_many_addresses_still_locks_the_username(bob_account):
    # Given bob's account, and three wrong passwords sent from three addresses
    for n in range(3):
        _me("guess", address=f"10.0.1.{n}")
    # When the right password comes from a fourth address / Then it is 429: the username is locked, not the address
    assert _me("s3cret-pass", address="10.0.2.1").status_code == 429


@PRODUCTION_IDENTITY
def test_below_the_limit_the_right_password_still_works(bob_account):
    # Given bob's account and two wrong passwords, one short of the limit
    _me("guess")
    _me("guess")
    # When the right password comes / Then it is let in
    assert _me("s3cret-pass").status_code == 200


@PRODUCTION_IDENTITY
def test_the_login_page_is_locked_too(bob_account, client):
    # Given bob's account and three wrong passwords on the login page
    for _ in range(3):
        client.post("/accounts/login/", {"username": "bob", "password": "guess"}, REMOTE_ADDR="10.0.3.1")
    # When the right password is posted there
    response = client.post(
        "/accounts/login/",
        {"username": "bob", "password": "s3cret-pass"},
        REMOTE_ADDR="10.0.3.1",
        HTTP_ACCEPT="text/html",
    )
    # Then the page answers 429 and says there were too many wrong passwords
    assert response.status_code == 429
    assert "Too many wrong passwords" in response.content.decode()


def test_behind_the_proxy_lockouts_count_the_address_the_proxy_saw(settings, rf):
    from collab.throttle import client_address

    # Given the service behind a proxy, and a request whose last forwarded hop is the address the proxy saw
    settings.WORKSPACE_BEHIND_PROXY = True
    request = rf.get("/", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.9", REMOTE_ADDR="10.0.0.2")
    # When the request's address is read / Then it is the one the proxy saw
    assert client_address(request) == "203.0.113.9"
    # When the service is not behind a proxy
    settings.WORKSPACE_BEHIND_PROXY = False
    # Then it is the peer's own address
    assert client_address(request) == "10.0.0.2"
