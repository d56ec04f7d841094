"""The ASGI handler of every app process (workspace/serving.py) driven directly, as the server drives
it: bodies under deadlines and a size limit, answers the client does not take, long work routed to
its own threads. Nothing here needs the database: what is refused is refused before any view runs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import StreamingHttpResponse

from collab import capacity
from collab.waits import Readable
from tests.fixtures.loops import run_on_its_own_loop
from workspace.serving import ClientTooSlow, WorkspaceASGIHandler

# Each step on the request threads looks over the connection its thread holds (one a live server of
# an earlier test may have opened): database access, though these tests store nothing.
pytestmark = pytest.mark.django_db


def _scope(method: str, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    sent = {"host": "127.0.0.1", "accept": "application/json", **(headers or {})}
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(name.encode(), value.encode()) for name, value in sent.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }


class _Exchange:
    """One request as the server would run it: what the client sends (chunks, then maybe silence)
    and what the app answered."""

    def __init__(self, body: list[bytes], *, then_silent: bool = False) -> None:
        self.body, self.then_silent = list(body), then_silent
        self.asked_for_body = 0
        self.messages: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.body:
            self.asked_for_body += 1
            chunk = self.body.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self.body) or self.then_silent}
        if self.then_silent:
            await asyncio.Event().wait()  # a client that stopped sending
        await asyncio.Event().wait()  # after the body: no disconnect until the test ends
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.messages if m["type"] == "http.response.start")

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        start = next(m for m in self.messages if m["type"] == "http.response.start")
        return [(name.lower(), value) for name, value in start["headers"]]

    @property
    def json(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body"))


def _served(scope: dict[str, Any], exchange: _Exchange) -> _Exchange:
    async def serve() -> None:
        await asyncio.wait_for(WorkspaceASGIHandler()(scope, exchange.receive, exchange.send), timeout=30)

    run_on_its_own_loop(serve())
    return exchange


def test_a_body_that_stops_arriving_is_answered_408_before_any_view_runs(settings):
    # Given a client timeout of 0.3 s and a PUT that sends ten bytes of its body, then nothing
    settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS = 0.3
    scope = _scope("PUT", "/a/notebook/items/1/files/x.bin", {"content-length": "100000"})
    # When the handler serves it
    exchange = _served(scope, _Exchange([b"x" * 10], then_silent=True))
    # Then it answers 408 request_body_timeout, the view never having been asked, and ends the
    # connection (what is left of the body must not be read as a next request)
    assert exchange.status == 408
    assert exchange.json["error"] == "request_body_timeout"
    assert (b"connection", b"close") in exchange.headers


def test_a_body_that_keeps_coming_is_read_whole(settings):
    # Given a body that arrives in ten pieces, each within the deadline
    settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS = 0.3
    exchange = _Exchange([b"{" + b" " * 100] + [b" " * 100] * 8 + [b"}"])
    # When the handler serves it (a POST the identity refuses: no view runs)
    _served(_scope("POST", "/me/tokens", {"content-length": "1002", "x-user-id": "nobody"}), exchange)
    # Then every piece was read, and the answer is the app's, not a timeout
    assert exchange.asked_for_body == 10
    assert exchange.status == 401


def test_a_body_larger_than_its_view_takes_is_413_before_a_byte_of_it_is_read(settings):
    # Given a POST that takes no upload, announcing 5 MiB (past the 4 MiB such a view takes)
    scope = _scope("POST", "/me/tokens", {"content-length": str(5 * 1024 * 1024), "x-user-id": "alice"})
    exchange = _Exchange([b"x" * 1024])
    # When the handler serves it / Then it is 413, before its sender is even known
    _served(scope, exchange)
    assert exchange.status == 413
    assert exchange.asked_for_body == 0


def test_a_file_write_may_be_as_large_as_a_file_and_no_larger(settings):
    # Given files of at most 1 MiB, and the write of one announcing 2 MiB
    settings.WORKSPACE_MAX_FILE_BYTES = 1024 * 1024
    settings.WORKSPACE_MAX_REQUEST_BODY_BYTES = 64 * 1024
    too_large = _Exchange([b"x" * 1024])
    scope = _scope("PUT", "/a/notebook/items/1/files/big.bin", {"content-length": str(2 * 1024 * 1024)})
    # When the handler serves it / Then it is 413 unread: its view takes at most the file and its framing
    _served(scope, too_large)
    assert too_large.status == 413
    assert too_large.asked_for_body == 0


def test_a_body_that_grows_past_the_limit_without_saying_so_is_413(settings):
    # Given a limit of 1 KiB and a chunked body (no Content-Length) of 4 KiB
    settings.WORKSPACE_MAX_REQUEST_BODY_BYTES = 1024
    exchange = _Exchange([b"x" * 1000, b"x" * 1000, b"x" * 2000])
    # When the handler serves it / Then it stops reading at the limit and answers 413
    _served(_scope("POST", "/me/tokens", {"x-user-id": "alice"}), exchange)
    assert exchange.status == 413
    assert exchange.asked_for_body == 2


def _closed_when_done(closed: threading.Event) -> Iterator[bytes | Readable]:
    try:
        yield b"first"
        while True:
            yield Readable((), 0.01)  # waits the loop spends, as a quiet command's would
            yield b"more"
    finally:
        closed.set()


def test_an_answer_the_client_takes_no_more_of_ends_at_the_send_deadline_and_its_work_is_closed(settings):
    # Given a client timeout of 0.2 s, a streamed answer that never ends, and a client that takes
    # its first part and then nothing more
    settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS = 0.2
    closed = threading.Event()
    response = StreamingHttpResponse(_closed_when_done(closed))
    taken: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        taken.append(message)
        if message.get("body") == b"more":
            await asyncio.Event().wait()

    # When the handler sends it / Then it gives up with ClientTooSlow, and the stream was closed
    with pytest.raises(ClientTooSlow):
        run_on_its_own_loop(WorkspaceASGIHandler().send_response(response, send))
    assert closed.is_set()
    assert [m.get("body") for m in taken if m["type"] == "http.response.body"] == [b"first", b"more"]


def test_a_model_turn_past_the_long_work_threads_is_refused_503_before_its_view_runs(settings):
    # Given one long-work thread, taken
    settings.WORKSPACE_LONG_WORK_THREADS = 1
    held = capacity.long_work.ticket()
    try:
        # When a chat message is sent to an item (a model's turn: long work)
        exchange = _served(
            _scope("POST", "/a/notebook/items/1/messages", {"x-user-id": "alice"}), _Exchange([b'{"content": "hi"}'])
        )
    finally:
        held.release()
    # Then it is 503 server_busy with Retry-After, and nothing ran
    assert exchange.status == 503
    assert exchange.json["error"] == "server_busy"
    assert (b"retry-after", b"5") in exchange.headers


def test_a_websocket_is_refused_before_its_handshake():
    # Given a WebSocket connection (none is served yet)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # When the handler is called / Then it closes it before accepting (the server answers 403)
    run_on_its_own_loop(WorkspaceASGIHandler()({"type": "websocket", "path": "/"}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008}]
