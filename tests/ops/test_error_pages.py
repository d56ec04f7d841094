"""The site's own 404, 403 and 500 in every mode, DEBUG (the demo) included: a browser never sees
Django's technical pages, an API client keeps JSON; admin's "View site" and the favicon."""

from __future__ import annotations

import pytest
from django.test import Client

from knowledge.models import Collection
from tests.fixtures.items import item_url

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.ops.error_urls")]

HTML = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def any_mode(request: pytest.FixtureRequest, settings) -> bool:
    """Runs a test with DEBUG on (the demo, `make run`) and off (production)."""
    settings.DEBUG = request.param
    return request.param


def _is_site_page(response) -> bool:
    return b'data-testid="error-page"' in response.content and b"site-header" in response.content


def test_a_path_nothing_serves_is_the_sites_404_page_not_the_url_list(any_mode, client: Client) -> None:
    # Given a browser, in either mode
    # When it asks for a path no URL matches
    response = client.get("/no/such/page", **HTML)

    # Then it gets the site's 404 page, which lists no URL patterns
    assert response.status_code == 404
    assert _is_site_page(response)
    assert b"URLconf" not in response.content
    assert b"api/schema" not in response.content


def test_another_persons_item_is_the_sites_404_page(any_mode, client: Client, make_item) -> None:
    # Given bob's notebook, and alice's browser
    item = make_item(created_by="bob")

    # When alice opens it
    response = client.get(item_url(item), **HTML)

    # Then she gets the site's 404 page, as for an item that does not exist
    assert response.status_code == 404
    assert _is_site_page(response)
    assert b"Traceback" not in response.content


def test_an_unshared_chat_is_the_sites_404_page(any_mode, client: Client, make_collection, make_chat) -> None:
    # Given bob's chat, not shared with alice
    chat = make_chat(make_collection(), owner="bob")

    # When alice's browser opens it
    response = client.get(f"/kb/chats/{chat.pk}", **HTML)

    # Then she gets the site's 404 page
    assert response.status_code == 404
    assert _is_site_page(response)


def test_an_api_client_keeps_a_json_404(any_mode, client: Client) -> None:
    # Given an API client, in either mode
    # When it asks for a path no URL matches
    response = client.get("/no/such/thing", **JSON)

    # Then the answer is JSON with an error code and a detail
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "Nothing is at /no/such/thing."}


def test_a_crashing_page_is_the_sites_500_page(any_mode, settings) -> None:
    # Given a browser whose page crashes, in either mode
    browser = Client(raise_request_exception=False)

    # When it opens the page
    response = browser.get("/test-errors/crash", **HTML)

    # Then it gets the site's 500 page, with no traceback in it
    assert response.status_code == 500
    assert _is_site_page(response)
    assert b"a bug in a page" not in response.content
    assert b"Traceback" not in response.content


def test_a_crash_answers_an_api_client_in_json(any_mode) -> None:
    # Given an API client calling something that crashes
    program = Client(raise_request_exception=False)

    # When it calls it
    response = program.get("/test-errors/crash", **JSON)

    # Then the answer is the JSON 500, with no traceback
    assert response.status_code == 500
    assert response.json()["error"] == "server_error"


def test_a_refused_permission_is_the_sites_403_page_with_the_reason(any_mode, client: Client) -> None:
    # Given a page that refuses the person
    # When a browser opens it
    response = client.get("/test-errors/forbidden", **HTML)

    # Then it gets the site's 403 page, which says why
    assert response.status_code == 403
    assert _is_site_page(response)
    assert b"Only the investigation&#x27;s owner can archive it." in response.content


def test_a_refused_permission_answers_an_api_client_in_json(any_mode, client: Client) -> None:
    # Given a page that refuses the caller
    # When an API client calls it
    response = client.get("/test-errors/forbidden", **JSON)

    # Then the answer is the JSON 403 with the reason
    assert response.status_code == 403
    assert response.json() == {
        "error": "permission_denied",
        "detail": "Only the investigation's owner can archive it.",
    }


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        ("/test-errors/refused", 409, b"already names a file here."),
        # The database refused a value (PostgreSQL and a NUL character): the API's 400 invalid_value.
        ("/test-errors/unstorable", 400, b"cannot be stored"),
    ],
    ids=["service", "database"],
)
def test_a_refusal_a_page_let_through_keeps_its_status_and_detail(
    any_mode, client: Client, path: str, status: int, detail: bytes
) -> None:
    # Given a page that lets a service's refusal (or the database's) through
    # When a browser opens it
    response = client.get(path, **HTML)

    # Then it gets the site's refusal page with that status and detail, not a 500
    assert response.status_code == status
    assert _is_site_page(response)
    assert detail in response.content


def test_a_quota_refusal_a_page_let_through_links_to_my_resources(any_mode, client: Client) -> None:
    # Given a page that lets a quota's 507 through
    # When a browser opens it
    response = client.get("/test-errors/quota", **HTML)

    # Then the refusal page names the limit and links to My resources, where room is made
    assert response.status_code == 507
    assert b"exceed alice&#x27;s count limit" in response.content
    assert b'<a href="/my-resources">Free capacity on My resources</a>' in response.content


def test_a_form_without_its_csrf_token_is_the_sites_403_page(any_mode, make_item) -> None:
    # Given a browser that never loaded our pages (no CSRF cookie or token), and alice's item
    item = make_item(created_by="alice")
    browser = Client(enforce_csrf_checks=True)

    # When a form posts a rename to the item page
    response = browser.post(item_url(item), {"title": "Renamed"}, **HTML)

    # Then it gets the site's 403 page saying to reload, and nothing changed
    assert response.status_code == 403
    assert _is_site_page(response)
    assert b"Reload the page" in response.content
    item.refresh_from_db()
    assert item.title != "Renamed"


def test_opening_a_post_only_address_in_a_browser_is_a_page_not_a_blank_405(any_mode, client: Client) -> None:
    # Given a browser
    # When it opens the address the user switcher's form posts to
    response = client.get("/switch-user", **HTML)

    # Then it gets the site's page saying what the address is for, and what it allows
    assert response.status_code == 405
    assert _is_site_page(response)
    assert b"where a form sends its changes" in response.content
    assert response["Allow"] == "POST"


def test_every_page_names_the_sites_icon(client: Client) -> None:
    # Given a browser
    # When it opens the home page
    response = client.get("/", **HTML)

    # Then the page names the icon, so the browser asks for no /favicon.ico
    assert b'rel="icon" href="/static/favicon.svg"' in response.content


def test_the_icon_is_served(client: Client) -> None:
    # Given the icon the pages name
    # When it is fetched
    response = client.get("/static/favicon.svg")

    # Then it is there, an SVG
    assert response.status_code == 200
    assert b"<svg" in b"".join(response.streaming_content)


def test_the_conventional_favicon_path_leads_to_the_icon(client: Client) -> None:
    # Given something that asks the conventional path (a PDF, the API docs)
    # When it asks for /favicon.ico
    response = client.get("/favicon.ico")

    # Then it is sent on to the icon
    assert response.status_code == 301
    assert response["Location"] == "/static/favicon.svg"


# Django builds its DEBUG technical page, settings and the server's environment included, for a
# request it refuses before or around a view (a Host it does not serve, more form fields or body
# than it reads): in the demo that page went to whoever sent the request.


def test_a_request_for_a_host_the_site_does_not_serve_is_the_sites_400_page(any_mode, client: Client) -> None:
    # Given a browser that names a host the site does not serve, in either mode
    # When it opens the home page
    response = client.get("/", HTTP_HOST="evil.example", **HTML)

    # Then it gets the site's 400 page: no traceback, no settings, no environment
    assert response.status_code == 400
    assert _is_site_page(response)
    assert b"Traceback" not in response.content
    assert b"DATABASES" not in response.content


def test_an_api_client_naming_a_host_the_site_does_not_serve_gets_json(any_mode, client: Client) -> None:
    # Given a program that names a host the site does not serve, in either mode
    # When it calls the API
    response = client.get("/me", HTTP_HOST="evil.example", **JSON)

    # Then the answer is the JSON 400, not Django's technical page in plain text
    assert response.status_code == 400
    assert response.json() == {"error": "bad_request", "detail": "The request could not be read."}


def test_a_form_with_more_fields_than_the_site_reads_is_the_sites_400_page(any_mode, client: Client, settings) -> None:
    # Given a site that reads at most ten form fields, in either mode
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    fields = {f"field{n}": "x" for n in range(11)}

    # When a browser posts eleven to a page
    response = client.post("/kb/collections", {"name": "Runbooks", **fields}, **HTML)

    # Then it gets the site's 400 page, and nothing was created
    assert response.status_code == 400
    assert _is_site_page(response)
    assert b"Traceback" not in response.content
    assert not Collection.objects.filter(name="Runbooks").exists()


def test_a_body_larger_than_the_site_reads_is_the_sites_413_page(any_mode, client: Client, settings) -> None:
    # Given a 1 MiB request limit, in either mode
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

    # When a browser posts two to a page
    response = client.post("/kb/collections", {"name": "x" * (2 * 1024 * 1024)}, **HTML)

    # Then it gets the site's page saying the body is too large, with no traceback
    assert response.status_code == 413
    assert _is_site_page(response)
    assert b"Traceback" not in response.content


def test_a_value_the_database_cannot_store_answers_a_program_in_json(any_mode, client: Client) -> None:
    # Given a page whose write the database refuses
    # When a program calls it
    response = client.get("/test-errors/unstorable", **JSON)

    # Then the answer is the API's own 400 for it
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_value"
