"""GET /healthz: the database and the sandbox backend, 200 when both work and 503 naming what failed."""

from __future__ import annotations

import socket

import pytest
from django.db import OperationalError
from django.test import Client

from workspace import health
from workspace.models import WorkerBeat
from workspace.worker import WorkerIdentity, beat

pytestmark = pytest.mark.django_db
# The checks' details (hosts, ports, paths) are for staff.
STAFF = "alice"


@pytest.fixture(autouse=True)
def alice_is_staff(settings) -> None:
    settings.WORKSPACE_MOCK_STAFF = [STAFF]


@pytest.fixture(autouse=True)
def worker_alive(clock) -> WorkerIdentity:
    """A `manage.py worker` that has just beaten, as beside every deployed server."""
    worker = WorkerIdentity(worker_id="beside-the-server")
    beat(worker)
    return worker


def test_healthz_is_ok_when_the_database_and_local_sandboxes_work(client: Client) -> None:
    # Given a working database, local sandboxes on cgroup v2 and a worker that just beat
    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then every check is ok, with the backend, its driver and the heartbeat's age
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "sandbox_backend": "ok",
        "worker": "ok",
        "worker_beat_age_seconds": 0.0,
        "backend": "local",
        "driver": "cgroup-v2",
    }


def test_healthz_is_503_when_the_newest_worker_heartbeat_is_stale(client: Client, clock, settings) -> None:
    # Given the only worker beat 61 s ago, with heartbeats stale after 60 s
    settings.WORKSPACE_WORKER_STALE_SECONDS = 60
    clock.advance(seconds=61)

    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then it fails on the worker, saying how old the heartbeat is
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["worker"], body["database"]) == ("failing", "failing", "ok")
    assert "worker: the newest worker heartbeat is 61s old (stale after 60s)" in body["detail"]


def test_healthz_is_503_when_no_worker_ever_reported(client: Client) -> None:
    # Given no worker heartbeat at all
    WorkerBeat.objects.all().delete()

    # When anyone asks for health
    response = client.get("/healthz")

    # Then it fails, telling a stranger only that
    assert response.status_code == 503
    assert response.json() == {"status": "failing", "error": "unhealthy", "detail": "A health check failed."}


def test_healthz_needs_nobody_signed_in(client: Client, acting_as) -> None:
    # Given nobody signed in
    acting_as(None)

    # When the API is called / Then it is 401
    assert client.get("/me", HTTP_ACCEPT="application/json").status_code == 401
    # When health is asked / Then it answers 200 all the same
    assert client.get("/healthz").status_code == 200


def test_healthz_is_503_naming_the_database_when_it_does_not_answer(client: Client, monkeypatch) -> None:
    # Given a database connection that refuses every cursor
    class BrokenConnection:
        vendor = "sqlite"  # the check's cursor path, whatever the suite runs on

        def cursor(self):
            raise OperationalError("connection refused")

    monkeypatch.setattr(health, "connection", BrokenConnection())

    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then it is 503, failing on the database only, and the detail says why
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"], body["sandbox_backend"], body["error"]) == (
        "failing",
        "failing",
        "ok",
        "unhealthy",
    )
    assert "database: the database does not answer: connection refused" in body["detail"]


def test_healthz_is_503_when_local_sandboxes_cannot_enforce_limits(client: Client, settings, monkeypatch) -> None:
    # Given local sandboxes on prlimit, and no prlimit binary on the host
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"
    monkeypatch.setattr("workspace.sandboxes.isolation.shutil.which", lambda _name: None)

    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then it is 503, failing on the sandbox backend, naming the missing binary
    assert response.status_code == 503
    assert response.json()["sandbox_backend"] == "failing"
    assert "no prlimit binary" in response.json()["detail"]


def test_healthz_reaches_the_sandbox_host_of_the_http_backend(client: Client, write_config, host) -> None:
    # Given a deployment whose sandboxes run on a reachable sandbox host
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "{host}"\n')

    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then it is 200, the http backend ok
    assert response.status_code == 200
    assert (response.json()["backend"], response.json()["sandbox_backend"]) == ("http", "ok")


def test_healthz_is_503_when_the_sandbox_host_is_unreachable(client: Client, write_config) -> None:
    # Given a deployment whose sandbox host is on a port where nothing listens
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    write_config(f'[sandbox]\nbackend = "http"\nhost_url = "http://127.0.0.1:{closed_port}"\n')

    # When staff ask for health
    response = client.get("/healthz", HTTP_X_USER_ID=STAFF)

    # Then it is 503, failing on the sandbox backend, naming the host that cannot be reached
    assert response.status_code == 503
    body = response.json()
    assert (body["database"], body["sandbox_backend"]) == ("ok", "failing")
    assert f"127.0.0.1:{closed_port} cannot be reached" in body["detail"]


@pytest.mark.parametrize("headers", [{}, {"HTTP_X_USER_ID": "bob"}])
def test_healthz_tells_anyone_but_staff_only_ok(client: Client, headers) -> None:
    # Given an anonymous caller (no header: the demo's default person, here staff) or a non-staff person
    # When they ask
    response = client.get("/healthz", **headers)
    # Then they learn the state in one word, nothing about hosts or checks
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_healthz_failing_tells_a_non_staff_caller_nothing_more(client: Client, monkeypatch) -> None:
    # Given a database connection refused with an internal host name in the error
    class BrokenConnection:
        vendor = "sqlite"  # the check's cursor path, whatever the suite runs on

        def cursor(self):
            raise OperationalError("connection to db.internal:5432 refused")

    monkeypatch.setattr(health, "connection", BrokenConnection())
    # When bob, not staff, asks for health
    response = client.get("/healthz", HTTP_X_USER_ID="bob")
    # Then it is 503 with the bare failure, nothing about the database
    assert response.status_code == 503
    assert response.json() == {"status": "failing", "error": "unhealthy", "detail": "A health check failed."}
