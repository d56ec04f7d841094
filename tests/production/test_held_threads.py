"""`make serve` keeps answering when one person holds every thread: long execs, stalled upload
bodies and half-sent headers leave `/healthz` answered, and the stalled reads are cut off."""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.live import Client, Server, close_sandboxes, gunicorn, run_django, wait_for
from tests.production.conftest import USER, USER_PASSWORD

pytestmark = pytest.mark.postgres

THREADS = 2
# Long enough for every wait below on a loaded machine; a give-up bound, never a speed the test asserts.
GIVE_UP_SECONDS = 30
# The step waits for a file the test writes, so however slow the machine, it holds its thread until then.
HOLD = "until [ -e release ]; do sleep 0.1; done"

SLOTS_HELD = """
import sys
from workspace.items.models import ExecSlot
print(ExecSlot.objects.filter(user_id=sys.argv[1]).count())
"""

RELEASE = """
import sys
from workspace.items import services
from workspace.items.models import Item
services.file_write(item=Item.objects.get(pk=sys.argv[1]), path="release", chunks=[b""])
"""


@pytest.fixture(scope="module")
def one_busy_worker(deployment, traversable_tmp: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    """gunicorn with one worker of two threads, a 2 s client timeout and execs that may wait long."""
    folder = Path(tempfile.mkdtemp(prefix="held", dir=traversable_tmp))
    config = folder / "patient.toml"
    config.write_text('[sandbox]\nexec_timeout = "120s"\n')
    env = {
        **deployment,
        "GUNICORN_THREADS": str(THREADS),
        "WORKSPACE_CLIENT_TIMEOUT_SECONDS": "2",
        "WORKSPACE_CONFIG": str(config),
    }
    try:
        with gunicorn(env, folder / "gunicorn.log", workers=1) as server:
            yield server, env
    finally:
        close_sandboxes(env)


@pytest.fixture
def bob(one_busy_worker) -> Iterator[Client]:
    server, _env = one_busy_worker
    client = Client(server.port, timeout=GIVE_UP_SECONDS)
    client.login(USER, USER_PASSWORD)
    yield client
    client.close()


def _item(client: Client) -> int:
    created = client.request("POST", "/a/notebook/items", {"title": "busy"})
    assert created.status == 201, created.body
    return created.json()["id"]


def _health(port: int) -> int:
    """The status of one `/healthz` (200, or 503 as no worker beats here), waiting at most GIVE_UP_SECONDS."""
    health = Client(port, timeout=GIVE_UP_SECONDS)
    try:
        response = health.get("/healthz")
        assert response.json()["status"] in ("ok", "failing")
        return response.status
    finally:
        health.close()


def test_health_answers_while_long_execs_hold_every_thread(one_busy_worker, bob):
    server, env = one_busy_worker
    # Given bob's notebook with its sandbox open
    item_id = _item(bob)
    assert bob.request("POST", f"/a/notebook/items/{item_id}/exec", {"command": "true"}).status == 200

    # When bob runs as many long commands as the worker has threads
    answers: list[int] = []

    def hold() -> None:
        client = Client(server.port, timeout=120)
        client.cookies = dict(bob.cookies)
        answers.append(client.request("POST", f"/a/notebook/items/{item_id}/exec", {"command": HOLD}).status)
        client.close()

    holders = [threading.Thread(target=hold) for _ in range(THREADS)]
    for holder in holders:
        holder.start()
    wait_for(
        lambda: run_django(SLOTS_HELD, env, USER).strip() == str(THREADS), "every thread held", seconds=GIVE_UP_SECONDS
    )

    # Then /healthz still answers, while the commands hold every thread
    assert _health(server.port) in (200, 503)
    assert all(holder.is_alive() for holder in holders)
    assert answers == []

    # And once released the commands finish
    run_django(RELEASE, env, str(item_id))
    for holder in holders:
        holder.join(GIVE_UP_SECONDS)
    assert answers == [200] * THREADS


def _stalled_upload(port: int, client: Client, path: str) -> socket.socket:
    """A PUT announcing 100000 bytes that sends ten, then nothing."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=GIVE_UP_SECONDS)
    cookies = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    head = (
        f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies}\r\nX-CSRFToken: {client.cookies['csrftoken']}\r\n"
        "Accept: application/json\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n"
    )
    sock.sendall(head.encode() + b"x" * 10)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    sock.close()
    return received


def test_stalled_uploads_are_cut_off_while_health_answers(one_busy_worker, bob):
    server, _env = one_busy_worker
    # Given bob's notebook
    item_id = _item(bob)
    files = f"/a/notebook/items/{item_id}/files"

    # When bob opens twice as many uploads as there are threads, each stalling after ten bytes,
    # and a request that stops halfway through its headers
    stalled = [_stalled_upload(server.port, bob, f"{files}/stalled-{n}.bin") for n in range(2 * THREADS)]
    half = socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP_SECONDS)
    half.sendall(b"GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\n")

    # Then /healthz answers meanwhile
    assert _health(server.port) in (200, 503)
    # And each stalled upload is cut off with a 408 saying why, the half request is closed
    for sock in stalled:
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"request_body_timeout" in answer
    assert _answer(half) == b""
    # And nothing was stored, while a whole upload goes through
    assert bob.get(f"{files}/stalled-0.bin").status == 404
    whole = bob.request("PUT", f"{files}/whole.bin", b"y" * 1000, raw=True)
    assert whole.status == 200, whole.body
