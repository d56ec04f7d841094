"""The database down is a 503 with Retry-After (JSON for clients, the site's page for people), never a 500;
/healthz gives up on a silent database host after its 2 s connect timeout."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import OperationalError
from django.test import Client

from workspace import health

pytestmark = pytest.mark.django_db

HTML = {"HTTP_ACCEPT": "text/html"}


@pytest.fixture
def database_down(monkeypatch) -> None:
    """Every query from now on fails as a database that went away does."""

    def refuse(self: BaseDatabaseWrapper) -> None:
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)


@pytest.fixture
def client() -> Client:
    # The test client re-raises what a view raised; a deployment answers instead, as here.
    return Client(raise_request_exception=False, HTTP_X_USER_ID="bob")


@pytest.mark.parametrize("path", ["/notifications", "/api/v1/workflow", "/kb/collections", "/me/resources"])
def test_an_api_call_with_the_database_down_is_a_503_with_retry_after(client, database_down, settings, path):
    # Given the database is down
    settings.WORKSPACE_DATABASE_RETRY_AFTER_SECONDS = 7

    # When an API client calls
    response = client.get(path, HTTP_ACCEPT="application/json")

    # Then it is told to retry, in JSON
    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    body = response.json()
    assert body["error"] == "database_unavailable"
    assert "Try again in 7 seconds" in body["detail"]


def test_a_write_with_the_database_down_is_a_503(client, database_down):
    # Given the database is down
    # When an API client writes
    response = client.post("/api/v1/workflow", {"name": "x", "steps": ["true"]}, content_type="application/json")

    # Then it is a 503, not a 500
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")


def test_a_page_with_the_database_down_is_the_sites_503_page(client, database_down, settings):
    # Given DEBUG on, as in the demo (Django would show its technical 500 page)
    settings.DEBUG = True

    # When a browser opens a page
    response = client.get("/kb/collections", **HTML)

    # Then it gets the site's own 503 page with Retry-After
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "The service is briefly unavailable" in response.content.decode()


def test_a_failure_inside_a_middleware_is_a_503_too(database_down):
    # Given a client whose API token must be looked up by the identity middleware
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION="Token wst_abc.def")

    # When it calls while the database is down
    response = client.get("/me", HTTP_ACCEPT="application/json")

    # Then the middleware's failure is a 503 as well
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")


def test_an_ordinary_server_error_stays_a_500(client, monkeypatch):
    # Given a view that fails for another reason
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("collab.selectors.inbox_state", crash)

    # When it is called
    response = client.get("/notifications", HTTP_ACCEPT="application/json")

    # Then it is still a 500, not a misleading 503
    assert response.status_code == 500
    assert response.json()["error"] == "server_error"


@pytest.fixture
def silent_database_host() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word, like a database host lost in a firewall."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def test_the_health_probe_gives_up_on_a_silent_database_host(silent_database_host):
    # Given the probe's parameters pointed at a host that never answers
    params = {"host": "127.0.0.1", "port": silent_database_host, "dbname": "x", "user": "x", "connect_timeout": 2}

    # When the probe runs / Then it fails (after its connect timeout) instead of hanging
    with pytest.raises(health.CheckFailed, match="does not answer"):
        health.postgres_probe(params)


@pytest.mark.postgres(reason="the connect timeout is a PostgreSQL connection parameter")
def test_the_health_probe_connects_with_a_two_second_timeout():
    # Given the service on PostgreSQL (SQLite is a local file: there is no host to wait for)
    # When the probe's connection is set up / Then it gives up after 2 s, whatever ordinary ones allow
    assert health.probe_connection_params()["connect_timeout"] == 2
