"""Password guessing is throttled before any hash: HTTP Basic, the login page and the admin login
answer 429 with Retry-After after a few wrong passwords, per username and per address (django-axes);
below the limit the right password works, and a login forgives only its own person's failures from
its own address (collab.throttle.forgive_own_failures)."""

from __future__ import annotations

from typing import Literal

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import Client
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


# The three doors a password comes through, and how each answers a login it lets in or turns away
# (a wrong password); a lockout is 429 at every door.
Door = Literal["form", "basic", "admin"]
DOORS: tuple[Door, ...] = ("form", "basic", "admin")
LET_IN = {"form": 302, "basic": 200, "admin": 302}
TURNED_AWAY = {"form": 200, "basic": 401, "admin": 200}
CAROL_PASSWORD = "carols-own-pass"
BOB_PASSWORD = "bobs-own-pass"
OFFICE = "10.0.5.1"


@pytest.fixture
def carol_and_bob(settings) -> None:
    """Two accounts, the limit at five; both staff, so that the admin login lets them in too."""
    settings.AXES_FAILURE_LIMIT = 5
    users = get_user_model().objects
    users.create_user("carol", password=CAROL_PASSWORD, is_staff=True)
    users.create_user("bob", password=BOB_PASSWORD, is_staff=True)


def _attempt(door: Door, username: str, password: str, address: str = OFFICE) -> HttpResponse:
    """One login through one door, from a fresh client (no session carried over)."""
    if door == "basic":
        client = APIClient(REMOTE_ADDR=address)
        client.credentials(HTTP_AUTHORIZATION=basic(username, password))
        return client.get("/me")
    path = "/accounts/login/" if door == "form" else "/admin/login/"
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password}, HTTP_ACCEPT="text/html")


def _guesses(door: Door, username: str, count: int, address: str = OFFICE) -> list[int]:
    return [_attempt(door, username, "a-guess", address).status_code for _ in range(count)]


def _assert_refused_with_the_reason(door: Door, response: HttpResponse) -> None:
    """The lockout answer: 429 and Retry-After; JSON for a script, the login page with the reason for a browser."""
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    if door == "basic":
        assert response.json()["error"] == "too_many_attempts"
    else:
        assert "Too many wrong passwords" in response.content.decode()


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("door", DOORS)
def test_another_persons_logins_from_the_address_do_not_reset_a_usernames_lockout(carol_and_bob, door):
    # Given, from one address: four wrong passwords for carol, then bob's right one, three times over
    carol_statuses: list[int] = []
    bob_statuses: list[int] = []
    for _ in range(3):
        carol_statuses += _guesses(door, "carol", 4)
        bob_statuses.append(_attempt(door, "bob", BOB_PASSWORD).status_code)
    # When carol's right password comes after them
    response = _attempt(door, "carol", CAROL_PASSWORD)
    # Then every guess for carol from the fifth on was refused, the right password too; bob got in
    # once, and then the address was locked for him as well (its count holds carol's failures)
    assert carol_statuses == [TURNED_AWAY[door]] * 4 + [429] * 8
    assert bob_statuses == [LET_IN[door], 429, 429]
    _assert_refused_with_the_reason(door, response)


@PRODUCTION_IDENTITY
def test_failures_through_one_door_count_at_the_others(carol_and_bob):
    # Given four wrong passwords for carol spread over the three doors, and bob let in by the form and the admin
    doors: list[Door] = ["basic", "form", "admin", "basic"]
    statuses = [_attempt(door, "carol", "a-guess").status_code for door in doors]
    bob_statuses = [_attempt(door, "bob", BOB_PASSWORD).status_code for door in ("form", "admin")]
    # When a fifth guess comes through the login form
    fifth = _attempt("form", "carol", "a-guess")
    # Then it is refused, and so is carol's right password at every door
    assert statuses == [TURNED_AWAY[door] for door in doors]
    assert bob_statuses == [LET_IN["form"], LET_IN["admin"]]
    assert fifth.status_code == 429
    for door in DOORS:
        _assert_refused_with_the_reason(door, _attempt(door, "carol", CAROL_PASSWORD))


@PRODUCTION_IDENTITY
def test_a_login_from_the_address_leaves_the_usernames_own_count(carol_and_bob):
    # Given four wrong passwords for carol from the office, then bob let in from the office
    _guesses("form", "carol", 4)
    assert _attempt("form", "bob", BOB_PASSWORD).status_code == 302
    # When a fifth guess for carol comes from another address, whose own count is nothing
    fifth = _attempt("form", "carol", "a-guess", address="10.0.6.1")
    # Then it is refused: carol's count across addresses still holds the office's four
    assert fifth.status_code == 429


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("door", ["form", "admin"])
def test_another_persons_login_does_not_reset_the_address_count(carol_and_bob, door):
    # Given one wrong password each for four usernames from the office (no username near its limit),
    # then bob let in from the office
    statuses = [_attempt(door, name, "a-guess").status_code for name in ("carol", "dave", "erin", "frank")]
    assert _attempt(door, "bob", BOB_PASSWORD).status_code == LET_IN[door]
    # When a fifth username is tried from the office
    fifth = _attempt(door, "grace", "a-guess")
    # Then it is refused: bob's login vouches for bob, not for the others tried from his address; and
    # the address stays locked for everyone until the cool-off, bob included
    assert statuses == [TURNED_AWAY[door]] * 4
    _assert_refused_with_the_reason(door, fifth)
    assert _attempt(door, "bob", BOB_PASSWORD).status_code == 429


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("door", ["form", "admin"])
def test_a_persons_own_login_resets_their_count(carol_and_bob, door):
    # Given four wrong passwords for carol, then her right one from the same address
    before = _guesses(door, "carol", 4)
    assert _attempt(door, "carol", CAROL_PASSWORD).status_code == LET_IN[door]
    # When four more wrong passwords come, and a fifth
    after = _guesses(door, "carol", 5)
    # Then the four are only wrong (her login forgave her typos) and the fifth is refused, counting from her login
    assert before == [TURNED_AWAY[door]] * 4
    assert after == [TURNED_AWAY[door]] * 4 + [429]


@PRODUCTION_IDENTITY
def test_a_scripts_basic_sign_in_forgives_nothing(carol_and_bob):
    # Given four wrong passwords for carol over HTTP Basic, then her right one there: a request
    # authenticated, not a login (Django sends no user_logged_in), so nothing is forgiven
    _guesses("basic", "carol", 4)
    assert _attempt("basic", "carol", CAROL_PASSWORD).status_code == 200
    # When one more wrong password comes / Then it is the fifth, and refused
    assert _attempt("basic", "carol", "a-guess").status_code == 429


@PRODUCTION_IDENTITY
def test_a_persons_own_login_does_not_forgive_guesses_from_other_addresses(carol_and_bob):
    # Given four wrong passwords for carol from another address, then carol let in from the office
    _guesses("basic", "carol", 4, address="10.0.7.1")
    assert _attempt("form", "carol", CAROL_PASSWORD).status_code == 302
    # When one wrong password for carol comes from the office
    typo = _attempt("form", "carol", "a-guess")
    # Then it is refused: her login vouches for what came from where she logged in, not for the other address
    assert typo.status_code == 429


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("username", ["x" * 300, "car\x00ol"], ids=["longer-than-any-account", "with-a-nul"])
def test_a_username_no_account_can_have_is_refused_without_a_server_error(carol_and_bob, door, username):
    # Given a username longer than any account's, or with a NUL (which PostgreSQL refuses in any query)
    # When it is tried through the door, past the limit
    statuses = _guesses(door, username, 6)
    # Then each try is refused as a wrong login or a value that cannot be stored, never a server error
    assert all(status < 500 for status in statuses), statuses
    if door == "basic":
        assert statuses == [401] * 6
