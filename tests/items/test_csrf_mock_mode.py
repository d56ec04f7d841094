"""In mock mode a request that names nobody is a browser acting as the default person: a
cross-site form must not be able to run commands through it, so its unsafe methods need the
CSRF token. A caller that names itself (X-User-Id) is not a browser form and works as before."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from quotas.models import SandboxActivity
from tests.fixtures.items import item_url

pytestmark = pytest.mark.django_db


def test_a_cross_site_form_cannot_run_a_command_as_the_default_person(make_item):
    # Given the demo's default person owns an item, and a browser that carries no token
    item = make_item(created_by="alice")
    browser = APIClient(enforce_csrf_checks=True)
    # When a form on another site posts a command to it
    response = browser.post(item_url(item, "/exec"), {"command": "touch pwned"}, format="json")
    # Then it is refused and nothing ran
    assert (response.status_code, response.json()["error"]) == (403, "csrf_failed")
    assert SandboxActivity.objects.count() == 0


def test_the_sites_own_pages_send_the_token_and_run_commands(make_item):
    # Given a browser that loaded one of our pages (and so holds the CSRF cookie)
    item = make_item(created_by="alice")
    browser = APIClient(enforce_csrf_checks=True)
    browser.get(item_url(item), HTTP_ACCEPT="text/html")
    token = browser.cookies["csrftoken"].value
    # When its page posts with the token
    response = browser.post(item_url(item, "/exec"), {"command": "echo ok"}, format="json", HTTP_X_CSRFTOKEN=token)
    # Then the command runs
    assert (response.status_code, response.json()["stdout"]) == (200, "ok\n")


def test_a_caller_that_names_itself_needs_no_token(make_item):
    # Given bob's item, and a script that names bob with X-User-Id and carries no CSRF token
    item = make_item(created_by="bob")
    script = APIClient(enforce_csrf_checks=True)
    script.credentials(HTTP_X_USER_ID="bob")
    # When it posts a command
    response = script.post(item_url(item, "/exec"), {"command": "echo ok"}, format="json")
    # Then the command runs
    assert response.status_code == 200
