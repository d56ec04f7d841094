"""`make serve`'s worker pieces (workspace/serving.py) on their own: a body that stops arriving is cut
off and answered 408 with nothing stored, and only a whole bodiless health request skips the pool.
tests/production/test_held_threads.py shows them in a real gunicorn."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fixtures.items import item_url
from workspace.items.filestore import workspace_dir
from workspace.serving import DeadlineInput, ReadDeadlines, RequestBodyTimeout, health_request

# A give-up bound for reads the watchdog must cut off: generous on a loaded machine, and the
# reading thread is released long before it (the deadlines below are 0.3 s).
GIVE_UP_SECONDS = 10


@pytest.fixture(scope="module")
def deadlines() -> ReadDeadlines:
    watchdog = ReadDeadlines()
    watchdog.start()
    return watchdog


@pytest.fixture
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    """The server's end of a connection and the client's."""
    server, client = socket.socketpair()
    server.settimeout(GIVE_UP_SECONDS)
    yield server, client
    server.close()
    client.close()


class _SocketBody:
    """What gunicorn hands the app as `wsgi.input`: reads that block on the socket until `size` arrived."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def read(self, size: int) -> bytes:
        data = b""
        while len(data) < size and (chunk := self.sock.recv(size - len(data))):
            data += chunk
        return data

    def readline(self, size: int) -> bytes:
        return self.read(size)


def _body(sock: socket.socket, deadlines: ReadDeadlines, *, min_rate: int = 1024) -> DeadlineInput:
    return DeadlineInput(_SocketBody(sock), sock, deadlines, timeout=0.3, min_rate=min_rate)


def test_a_body_that_stops_arriving_is_cut_off(connection, deadlines):
    # Given a client that sends ten bytes of its body, then nothing
    server, client = connection
    client.sendall(b"x" * 10)

    # When the app reads the body
    began = time.monotonic()
    with pytest.raises(RequestBodyTimeout):
        _body(server, deadlines).read(1000)

    # Then the read was cut off instead of waiting for the client (the give-up bound is not a speed)
    assert time.monotonic() - began < GIVE_UP_SECONDS
    # And every later read says so at once
    body = _body(server, deadlines)
    body.cut_off = True
    with pytest.raises(RequestBodyTimeout):
        body.read(1)


def test_a_body_that_keeps_coming_is_read_whole(connection, deadlines):
    # Given a client that sends 200 KiB in pieces, faster than the minimum rate
    server, client = connection
    data = bytes(range(256)) * 800

    def send() -> None:
        for start in range(0, len(data), 50_000):
            client.sendall(data[start : start + 50_000])
            time.sleep(0.05)

    sender = threading.Thread(target=send)
    sender.start()

    # When the app reads it all / Then it gets every byte
    assert _body(server, deadlines, min_rate=1024 * 1024).read(len(data)) == data
    sender.join()


@pytest.mark.django_db
def test_an_upload_cut_off_is_408_and_stores_nothing(alice_api, make_item):
    # Given alice's notebook, and an upload body that stops arriving
    item = make_item()

    # When she sends it
    response = alice_api.put(
        item_url(item, "/files/big.bin"),
        b"0123456789",
        content_type="application/octet-stream",
        **{"wsgi.input": _Stalled()},
    )

    # Then it is a 408 saying why, and no file (not even a temp file) is left
    assert (response.status_code, response.json()["error"]) == (408, "request_body_timeout")
    assert alice_api.get(item_url(item, "/files")).json() == []
    assert not list(workspace_dir(item.pk).glob("*big.bin*")) + list(workspace_dir(item.pk).glob(".*"))


@pytest.mark.django_db
def test_a_json_body_cut_off_is_408(alice_api, make_item):
    # Given alice's notebook
    # When an exec's JSON body stops arriving / Then it is a 408
    response = alice_api.post(
        item_url(make_item(), "/exec"), b"{}", content_type="application/json", **{"wsgi.input": _Stalled()}
    )
    assert (response.status_code, response.json()["error"]) == (408, "request_body_timeout")


@pytest.mark.django_db
def test_a_page_form_cut_off_is_408_not_an_empty_form(alice_api):
    # Given alice on the new-workflow form
    # When its body stops arriving
    response = alice_api.post(
        "/workflows/new",
        b"name=x",
        content_type="application/x-www-form-urlencoded",
        HTTP_ACCEPT="text/html",
        **{"wsgi.input": _Stalled()},
    )
    # Then the site's page says 408, and no form handling saw an empty form
    assert response.status_code == 408
    assert "stopped arriving" in response.content.decode()


class _Stalled:
    """A `wsgi.input` whose client stopped sending: what DeadlineInput raises past its deadline."""

    def read(self, size: int = -1) -> bytes:
        raise RequestBodyTimeout("the request body stopped arriving")

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


@pytest.mark.parametrize(
    ("head", "health"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", True),
        (b"HEAD /healthz?probe=1 HTTP/1.0\r\n\r\n", True),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\n", False),  # headers not all here yet
        (b"GET /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\n", False),  # a body to read
        (b"GET /healthz HTTP/1.1\r\ntransfer-encoding : chunked\r\n\r\n", False),
        (b"POST /healthz HTTP/1.1\r\n\r\n", False),
        (b"GET /healthzz HTTP/1.1\r\n\r\n", False),
        (b"GET /me HTTP/1.1\r\nX-Path: /healthz\r\n\r\n", False),
        (b"GET  /healthz HTTP/1.1\r\n\r\n", False),
    ],
)
def test_only_a_whole_bodiless_health_request_skips_the_pool(head, health):
    # Given the first bytes of a connection / When they are looked at / Then only a whole health request is one
    assert health_request(head, b"/healthz") is health
