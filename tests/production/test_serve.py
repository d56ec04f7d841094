"""`make serve`'s gunicorn: several workers over one PostgreSQL, an override seen everywhere within 5 s."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from bench.live import PRODUCTION_CONFIG, Client, children_of, command_line, gunicorn
from tests.production.conftest import STAFF, STAFF_PASSWORD, USER, USER_PASSWORD

pytestmark = pytest.mark.postgres

MEMO_SECONDS = 5.0
# How long past the memo's lifetime the pollers keep trying before the test gives up (a give-up
# bound on a busy machine, not a figure the test asserts).
GIVE_UP_SECONDS = 10.0
POLLERS = 3

# The production config plus, for this test only, a header naming the worker that answered.
PID_HEADER_CONFIG = f"""
import os
_production = {str(PRODUCTION_CONFIG)!r}
_namespace = {{"__file__": _production, "__name__": "production_gunicorn_conf"}}
exec(compile(open(_production).read(), _production, "exec"), _namespace)
globals().update({{k: v for k, v in _namespace.items() if not k.startswith("__")}})


def post_worker_init(worker):
    inner = worker.wsgi

    async def app(scope, receive, send):
        async def sending(message):
            if message["type"] == "http.response.start":
                message = {{**message, "headers": [*message["headers"], (b"x-worker-pid", str(os.getpid()).encode())]}}
            await send(message)

        await inner(scope, receive, sending)

    worker.wsgi = app
"""


@pytest.fixture(scope="module")
def two_workers(deployment, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gunicorn")
    config = folder / "gunicorn_pid_header.conf.py"
    config.write_text(PID_HEADER_CONFIG)
    # A new connection per poll: both workers accept from the one socket, so both answer (a
    # keep-alive connection sticks to one worker).
    env = dict(deployment)
    with gunicorn(env, folder / "gunicorn.log", workers=2, config=config) as server:
        yield server


def _count_limit_by_pid(port: int, until, deadline: float) -> list[tuple[float, str, object]]:
    """Polls /me/resources as the plain user from several connections until `until(seen)` or the deadline.

    Returns (request start, answering pid, limits.count) for every answer.
    """
    seen: list[tuple[float, str, object]] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def poll(client: Client) -> None:
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                began = time.monotonic()
                response = client.get("/me/resources", headers={"Connection": "close"})
                assert response.status == 200, response.body
                with lock:
                    seen.append((began, response.headers["x-worker-pid"], response.json()["limits"]["count"]))
                    if until(seen):
                        stop.set()
                time.sleep(0.02)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    clients = []
    for _ in range(POLLERS):
        client = Client(port)
        client.login(USER, USER_PASSWORD)
        clients.append(client)
    threads = [threading.Thread(target=poll, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    if errors:
        raise errors[0]
    return seen


def test_an_override_written_through_one_worker_is_seen_by_the_other_once_its_memo_expires(two_workers):
    # Given both workers answering with the site default, so each holds the old value in its memo
    # (the 5 s lifetime itself is shown with a movable clock in tests/quotas/test_overrides.py)
    before = _count_limit_by_pid(
        two_workers.port, lambda seen: len({pid for _, pid, _ in seen}) == 2, time.monotonic() + 20
    )
    assert len({pid for _, pid, _ in before}) == 2, "only one worker ever answered"
    assert {count for _, _, count in before} == {None}

    # When staff write an override through one of them
    staff = Client(two_workers.port, basic=(STAFF, STAFF_PASSWORD))
    written_at = time.monotonic()
    put = staff.request("PUT", f"/admin/user-resources/{USER}", {"count": 7})
    assert put.status == 200, put.body
    writer = put.headers["x-worker-pid"]

    def other_saw_it(seen):
        return any(pid != writer and count == 7 for _, pid, count in seen)

    # Then the writer shows it at once (it dropped its memo) and the other once its memo expires
    after = _count_limit_by_pid(two_workers.port, other_saw_it, written_at + MEMO_SECONDS + GIVE_UP_SECONDS)
    assert other_saw_it(after), f"the other worker never showed the override: {after}"
    assert {count for _, pid, count in after if pid == writer} <= {7}


def test_pages_and_static_files_are_served_with_debug_off(two_workers):
    # Given gunicorn with debug off, and nobody signed in
    client = Client(two_workers.port)
    # When a page is opened
    page = client.get("/my-resources", headers={"Accept": "text/html"})
    # Then it redirects to the login page
    assert page.status == 302
    assert "/accounts/login/" in page.headers["location"]
    stylesheet = next(Path(__file__).resolve().parents[2].joinpath("static", "css").glob("*.css")).name
    # When a stylesheet is fetched / Then it is served
    assert client.get(f"/static/css/{stylesheet}").status == 200
    # When a page that does not exist is opened
    missing = client.get("/no-such-page", headers={"Accept": "text/html"})
    # Then it is a 404 that shows no traceback and no URLconf
    assert missing.status == 404
    assert b"Traceback" not in missing.body
    assert b"URLconf" not in missing.body


def test_mock_identity_headers_are_ignored_in_production(two_workers):
    # Given gunicorn with real identity
    # When a request names bob with X-User-Id only
    response = Client(two_workers.port).get("/me", headers={"X-User-Id": USER})
    # Then it is 401
    assert response.status == 401


def test_stopping_gunicorn_stops_the_worker_it_started_beside_it(deployment, tmp_path):
    # Given gunicorn started with its worker beside it
    env = {**deployment, "WORKSPACE_SERVE_WORKER": "1", "WORKSPACE_WORKER_INTERVAL": "3600"}
    with gunicorn(env, tmp_path / "gunicorn.log", workers=1) as server:
        # When the worker has started
        deadline = time.monotonic() + 10
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            workers = [pid for pid in children_of(server.process.pid) if "manage.py worker" in command_line(pid)]
            time.sleep(0.05)
        # Then it is running
        assert workers, server.log_text()
        # When gunicorn is sent SIGTERM
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
    # Then the worker it started is gone too
    assert all(not Path(f"/proc/{pid}").exists() or "manage.py worker" not in command_line(pid) for pid in workers)
