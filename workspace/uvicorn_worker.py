"""The server of every app process: uvicorn (httptools, uvloop) workers under gunicorn (`make serve`,
`make run`; workspace/gunicorn.conf.py), with what uvicorn leaves out for a service open to slow
clients (README "Production"):

- a deadline on a request's headers: from a connection's first byte, or from its opening when
  nothing comes, they must arrive whole within WORKSPACE_CLIENT_TIMEOUT_SECONDS, and be at most
  MAX_HEADER_BYTES, else the connection is closed (uvicorn waits for them for ever);
- an answer the app gives up on (a client that took nothing of it for WORKSPACE_CLIENT_TIMEOUT_SECONDS)
  ends its connection at once, what was not sent dropped (uvicorn would wait to send it for ever);
- kept-alive connections close after WORKSPACE_IDLE_TIMEOUT_SECONDS without a request, and past
  WORKSPACE_MAX_CONNECTIONS_PER_PROCESS connections (or requests in hand) a request is answered
  503 at once (uvicorn's `timeout_keep_alive` and `limit_concurrency`);
- on shutdown the app first stops its long work (`workspace.serving.drain`), so that running
  commands end with a result that says why, then uvicorn waits for the connections, at most
  WORKSPACE_SHUTDOWN_SECONDS.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
from typing import Any

from django.conf import settings
from gunicorn.arbiter import Arbiter
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker

# More header than any client of ours sends; nginx's default is 8 KiB per line and 32 KiB in all.
MAX_HEADER_BYTES = 64 * 1024
# How long a connection refused for its headers is still read (and what comes discarded) after its
# answer, so that the client reads the answer rather than a reset; nginx's `lingering_timeout`.
LINGER_SECONDS = 2.0


class DeadlineHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size limit on each request's headers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._in_headers = True
        self._lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._in_headers:
            # Only up to the end of the headers: a read that completes them may carry body too.
            end = data.find(b"\r\n\r\n")
            self._header_bytes += len(data) if end < 0 else end + 4
            if self._header_bytes > MAX_HEADER_BYTES:
                self._close(b"431 Request Header Fields Too Large")
                return
        super().data_received(data)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        async def cut_off_when_given_up(scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)
            if cycle.response_started and not cycle.response_complete and not cycle.disconnected:
                # The app gave up on an answer the client took nothing of (serving.ClientTooSlow): a
                # plain close would wait to send what the client never reads, for ever. A reset, with
                # nothing lingering in the kernel either.
                cycle.disconnected = True
                with contextlib.suppress(OSError, AttributeError):
                    self.transport.get_extra_info("socket").setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                self.transport.abort()

        super()._start_asgi_task(cycle, cut_off_when_given_up)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_deadline is None:
            self._await_headers()

    def on_headers_complete(self) -> None:
        self._headers_done()
        super().on_headers_complete()

    def _await_headers(self) -> None:
        self._in_headers, self._header_bytes = True, 0
        self._header_deadline = self.loop.call_later(settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS, self._too_slow)

    def _headers_done(self) -> None:
        self._in_headers = False
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        self._close(b"408 Request Timeout")

    def eof_received(self) -> bool | None:
        if self._lingering:
            self.transport.close()
            return None
        return super().eof_received()

    def _close(self, status: bytes) -> None:
        """Answer `status` and close, lingering: closing a socket that the client still writes to
        (a trickler's next header line) makes the kernel send a reset, which can reach the client
        before it has read the answer, and its read then fails instead of saying why."""
        if self.transport.is_closing() or self._lingering:
            return
        self._lingering = True
        self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class DrainingServer(Server):
    """uvicorn's server, that lets the app stop its long work before it waits for the connections."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        from workspace.serving import drain

        await drain()
        await super().shutdown(sockets)


WEBSOCKET_MAX_MESSAGE_BYTES = 1024 * 1024


def server_options() -> dict[str, Any]:
    """uvicorn's options for an app process (the settings in the module docstring)."""
    return {
        "http": DeadlineHttpProtocol,
        "loop": "uvloop",
        "lifespan": "on",
        "timeout_keep_alive": settings.WORKSPACE_IDLE_TIMEOUT_SECONDS,
        "limit_concurrency": settings.WORKSPACE_MAX_CONNECTIONS_PER_PROCESS,
        "timeout_graceful_shutdown": settings.WORKSPACE_SHUTDOWN_SECONDS,
        "access_log": False,  # the app logs each request itself (workspace/request_log.py)
        # A WebSocket message larger than this (a terminal's input comes in frames of at most
        # 64 KiB) closes its connection with 1009 before it is read whole.
        "ws_max_size": WEBSOCKET_MAX_MESSAGE_BYTES,
    }


class WorkspaceUvicornWorker(UvicornWorker):
    """gunicorn's worker for uvicorn, with the options above and the draining server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Over gunicorn's own (`keepalive` among them), which the parent applies first.
        self.CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, **server_options()}
        super().__init__(*args, **kwargs)

    async def _serve(self) -> None:
        self.config.app = self.wsgi
        server = DrainingServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
