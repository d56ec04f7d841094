"""Who a token acts for is remembered a few seconds per process (WORKSPACE_IDENTITY_CACHE_SECONDS):
repeated requests skip the token and user lookups, yet a revoked token, a deactivated or demoted
owner and a logged-out session are refused at once by the process that made the change; other
processes follow within the setting's seconds."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from collab import tokens
from collab.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def django_accounts(settings) -> None:
    settings.WORKSPACE_USER_DIRECTORY = "collab.identity.DjangoUserDirectory"
    settings.WORKSPACE_CURRENT_USER_PROVIDER = "collab.identity.RequestUserProvider"
    settings.WORKSPACE_IDENTITY_CACHE_SECONDS = 5


@pytest.fixture
def erin(django_accounts):
    return get_user_model().objects.create_user("erin", password="long-enough-pass", is_staff=True)


@pytest.fixture
def erin_browser(erin) -> APIClient:
    browser = APIClient()
    browser.force_login(erin)
    return browser


@pytest.fixture
def erin_token(erin_browser) -> dict:
    return erin_browser.post("/me/tokens", {"name": "script"}, format="json").json()


def _script(token: dict) -> APIClient:
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {token['token']}")


def test_a_scripts_repeated_requests_do_not_look_the_token_up_again(erin_token, django_assert_max_num_queries):
    # Given erin's token, used once
    script = _script(erin_token)
    etag = script.get("/notifications")["ETag"]
    # When the script asks again / Then no statement reads the token or the user
    with django_assert_max_num_queries(1) as queries:
        script.get("/notifications", HTTP_IF_NONE_MATCH=etag)
    statements = " ".join(q["sql"] for q in queries.captured_queries)
    assert "collab_apitoken" not in statements
    assert "auth_user" not in statements


def test_a_token_revoked_by_its_owner_is_refused_at_once(erin_browser, erin_token):
    # Given erin's token, remembered by this process after a use
    script = _script(erin_token)
    assert script.get("/notifications").status_code == 200
    # When she revokes it
    assert erin_browser.delete(f"/me/tokens/{erin_token['id']}").status_code in (200, 204)
    # Then the very next request with it is refused
    assert script.get("/notifications").status_code == 401


def test_a_deactivated_owners_remembered_token_is_refused_at_once(erin, erin_token):
    # Given erin's token, remembered after a use
    script = _script(erin_token)
    assert script.get("/notifications").status_code == 200
    # When she is deactivated
    erin.is_active = False
    erin.save()
    # Then her token is refused on the next request
    assert script.get("/notifications").status_code == 401


def test_a_demoted_owners_remembered_token_loses_staff_at_once(erin, erin_token):
    # Given erin's token used on a staff-only endpoint while she is staff
    script = _script(erin_token)
    assert script.get("/admin/user-resources").status_code == 200
    # When she stops being staff
    erin.is_staff = False
    erin.save()
    # Then the endpoint is hidden from her token at once
    assert script.get("/admin/user-resources").status_code == 404


def test_a_token_revoked_by_another_process_works_at_most_the_cache_seconds_longer(erin_token, monkeypatch):
    # Given erin's token, remembered by this process after a use
    script = _script(erin_token)
    assert script.get("/notifications").status_code == 200
    # When another process revokes it (a row change this process is not told about)
    ApiToken.objects.filter(pk=erin_token["id"]).update(revoked_at=timezone.now())
    still = script.get("/notifications").status_code
    # Then this process refuses it once the cache seconds have passed
    later = tokens.time.monotonic() + 5.01
    monkeypatch.setattr(tokens.time, "monotonic", lambda: later)
    assert (still, script.get("/notifications").status_code) == (200, 401)


def test_with_no_cache_seconds_every_request_looks_the_token_up(erin_token, settings):
    # Given a deployment that remembers nothing
    settings.WORKSPACE_IDENTITY_CACHE_SECONDS = 0
    script = _script(erin_token)
    assert script.get("/notifications").status_code == 200
    # When another process revokes the token / Then the next request already sees it
    ApiToken.objects.filter(pk=erin_token["id"]).update(revoked_at=timezone.now())
    assert script.get("/notifications").status_code == 401


def test_a_logged_out_session_is_refused_at_once(erin):
    # Given erin signed in through the login form
    browser = Client()
    assert browser.post("/accounts/login/", {"username": "erin", "password": "long-enough-pass"}).status_code == 302
    assert browser.get("/me", HTTP_ACCEPT="application/json").status_code == 200
    # When she logs out
    browser.post("/accounts/logout/")
    # Then the same cookie jar is nobody on the next request
    assert browser.get("/me", HTTP_ACCEPT="application/json").status_code == 401
