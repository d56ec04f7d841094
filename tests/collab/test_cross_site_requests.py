"""Cross-site requests through HTTP Basic (issue 25.2): no 401 invites a browser to Basic, a Basic
write from another site's page is refused before it runs, and the API takes no form body
(a form on another origin can only send one), so nothing a foreign page posts runs as anyone."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from collab.models import ApiToken
from quotas.models import SandboxActivity
from tests.collab.test_identity import PRODUCTION_IDENTITY, basic
from tests.fixtures.items import item_url
from workspace.agent.models import ItemMessage
from workspace.items.models import Item
from workspace.workflows.models import WorkflowRun

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("workspace_dirs")]

ATTACKER = "https://attacker.example"
FORM_ENCODINGS = ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"]


@pytest.fixture
def bob_account():
    return get_user_model().objects.create_user("bob", password="s3cret-pass")


def _form_body(content_type: str, fields: dict[str, str]) -> str:
    """What a browser sends for a <form> with `fields` in each encoding a form may use."""
    if content_type.startswith("multipart/"):
        parts = [f'--x\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
        return "".join(parts) + "--x--\r\n"
    if content_type == "text/plain":
        return "".join(f"{k}={v}\r\n" for k, v in fields.items())
    return urlencode(fields)


def _browser_post(path: str, *, content_type: str, fields: dict[str, str], origin: str | None = ATTACKER):
    """A browser that cached bob's Basic credentials, submitting a form another site's page holds."""
    headers = {"HTTP_AUTHORIZATION": basic("bob", "s3cret-pass"), "HTTP_ACCEPT": "application/json"}
    if origin is not None:
        headers["HTTP_ORIGIN"] = origin
    return Client().post(path, _form_body(content_type, fields), content_type=content_type, **headers)


def _targets(make_item, make_workflow) -> dict[str, tuple[str, dict[str, str]]]:
    item = make_item(created_by="bob")
    workflow_id = make_workflow(["touch pwned"], user="bob", item_id=str(item.pk))
    return {
        "exec": (item_url(item, "/exec"), {"command": "touch pwned"}),
        "chat": (item_url(item, "/messages"), {"content": "$ touch pwned"}),
        "workflow run": (item_url(item, f"/workflows/{workflow_id}/run"), {}),
    }


def _nothing_ran() -> bool:
    return not (SandboxActivity.objects.exists() or ItemMessage.objects.exists() or WorkflowRun.objects.exists())


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("target", ["exec", "chat", "workflow run"])
@pytest.mark.parametrize("content_type", FORM_ENCODINGS)
def test_a_form_on_another_site_cannot_run_anything_with_cached_basic_credentials(
    bob_account, make_item, make_workflow, target, content_type
):
    # Given bob's item and workflow, and a browser that holds bob's Basic credentials
    path, fields = _targets(make_item, make_workflow)[target]
    # When a page of another site submits a form to exec, the chat or a workflow run
    response = _browser_post(path, content_type=content_type, fields=fields)
    # Then it is 403 csrf_failed naming the other site, and no sandbox, message or run exists
    assert response.status_code == 403
    assert (response.json()["error"], ATTACKER in response.json()["detail"]) == ("csrf_failed", True)
    assert _nothing_ran()


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("target", ["exec", "chat"])
@pytest.mark.parametrize("content_type", FORM_ENCODINGS)
def test_a_form_body_is_415_even_without_an_origin(bob_account, make_item, make_workflow, target, content_type):
    # Given bob's item, and a client that sends his Basic credentials and names no origin
    path, fields = _targets(make_item, make_workflow)[target]
    # When it posts a form body where the API takes JSON
    response = _browser_post(path, content_type=content_type, fields=fields, origin=None)
    # Then it is 415 unsupported_media_type and nothing ran
    assert (response.status_code, response.json()["error"]) == (415, "unsupported_media_type")
    assert _nothing_ran()


@PRODUCTION_IDENTITY
def test_an_empty_form_from_another_site_cannot_answer_a_handover(bob_account, make_item):
    # Given alice's item waiting for bob to accept paying for it
    item = make_item(created_by="alice")
    Item.objects.filter(pk=item.pk).update(pending_owner="bob", pending_owner_requested_by="alice")
    # When another site's page submits an empty form (no body to refuse) with bob's Basic credentials
    response = _browser_post(f"/me/resources/handovers/{item.pk}/accept", content_type=FORM_ENCODINGS[0], fields={})
    # Then it is 403 and alice still pays
    assert response.status_code == 403
    assert Item.objects.get(pk=item.pk).owner == "alice"


@PRODUCTION_IDENTITY
def test_a_form_from_another_site_cannot_write_a_generated_route(bob_account):
    # Given a browser holding bob's Basic credentials
    # When another site's page submits a form creating a workflow
    response = _browser_post("/api/v1/workflow", content_type=FORM_ENCODINGS[0], fields={"name": "x", "steps": "id"})
    # Then it is 403 with the service's error body, and nothing is stored
    assert response.status_code == 403
    assert response.json()["error"] == "csrf_failed"
    assert APIClient().get("/api/v1/workflow/count", HTTP_AUTHORIZATION=basic("bob", "s3cret-pass")).json() == {
        "count": 0
    }


@PRODUCTION_IDENTITY
@pytest.mark.parametrize("origin", [None, "http://testserver"], ids=["a script", "our own page"])
def test_basic_credentials_still_write_json_from_a_script_or_our_own_pages(bob_account, origin):
    # Given bob's Basic credentials
    headers = {"HTTP_AUTHORIZATION": basic("bob", "s3cret-pass")}
    if origin:
        headers["HTTP_ORIGIN"] = origin
    # When a script (no Origin) or a page of this site creates an item with a JSON body
    response = APIClient().post("/a/notebook/items", {"title": "From a script"}, format="json", **headers)
    # Then it is created, bob's
    assert response.status_code == 201
    assert Item.objects.get().created_by == "bob"


@PRODUCTION_IDENTITY
@pytest.mark.parametrize(
    ("path", "authorization"),
    [
        ("/me", None),
        ("/api/v1/workflow", None),
        ("/me", basic("bob", "wrong")),
        ("/me", "Basic !!!not-base64"),
    ],
    ids=["anonymous", "anonymous on a generated route", "a wrong password", "a malformed Basic header"],
)
def test_no_401_invites_a_browser_to_basic(bob_account, path, authorization):
    # Given real identity
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    # When a request is refused as unauthenticated
    response = APIClient().get(path, **headers)
    # Then its challenge is Bearer (tokens), never Basic, which a browser would answer with a prompt
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer ")
    assert "basic" not in response["WWW-Authenticate"].lower()


@PRODUCTION_IDENTITY
def test_a_csrf_refusal_on_a_generated_route_has_the_shared_error_body(bob_account):
    # Given bob signed in with a session on a client that checks CSRF
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(bob_account)
    # When he writes through /api/v1/ without the page's CSRF token
    response = client.post("/api/v1/workflow", {"name": "nightly", "steps": ["df"]}, format="json")
    # Then it is 403 csrf_failed with a detail, as everywhere else
    assert response.status_code == 403
    assert response.json()["error"] == "csrf_failed"
    assert "CSRF" in response.json()["detail"]


def test_a_json_endpoint_refuses_a_form_body_and_stores_nothing(bob_api):
    # Given bob (mock identity, named by header)
    # When he creates a token with a form-encoded body
    response = bob_api.post(
        "/me/tokens", "name=backup", content_type="application/x-www-form-urlencoded", HTTP_ACCEPT="application/json"
    )
    # Then it is 415 with the shared error body, and no token exists
    assert response.status_code == 415
    assert set(response.json()) >= {"error", "detail"}
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status"),
    [
        ("POST", "/api/v1/workflow", "name=x", "application/x-www-form-urlencoded", 415),
        ("POST", "/api/v1/workflow", "{broken", "application/json", 400),
        ("POST", "/api/v1/workflow", '{"colour": 1}', "application/json", 422),
        ("GET", "/api/v1/workflow/nope/data", "", "application/json", 404),
        ("DELETE", "/api/v1/workflow", "", "application/json", 405),
    ],
    ids=["form body", "malformed JSON", "unknown field", "no such workflow", "wrong method"],
)
def test_every_refusal_on_a_generated_route_has_an_error_code_and_a_detail(
    alice_api, method, path, body, content_type, status
):
    # Given alice (mock identity)
    # When a request to /api/v1/ is refused
    response = alice_api.generic(method, path, body, content_type=content_type, HTTP_ACCEPT="application/json")
    # Then the body names a specific error code and says why
    assert response.status_code == status
    assert response.json()["error"] not in ("", "error")
    assert response.json()["detail"]
