"""Bounds on everything a model server sends, in time and in bytes, below the model client.

The client (openai's, over httpx) checks its own timeout only per read, and the provider checked
the turn's deadline only between parsed events: a server that sends one line that never ends, or
well-formed chunks forever, was read for as long as it kept sending, into memory. Here the raw
bytes are counted as they arrive, on the one connection each request opens:

- a wall-clock deadline over the whole request, headers and body: past it, the socket is shut
  down from `collab.deadlines`' thread (a read blocked in `recv()` returns at once) and the
  request fails as a timeout;
- a cap on one line (an event of the stream, or a whole non-streamed answer) and on the whole
  response; past either the request fails, having kept no more than the cap.

Each failure is a `ProviderError` whose one sentence says what happened.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from collab.deadlines import TimeLimit


class ModelServerRefused(Exception):
    """Raised where the bounds cut a response off; the provider turns it into a `ProviderError`
    (`kind`, `reason`), whatever the client wrapped it in."""

    def __init__(self, reason: str, *, kind: str) -> None:
        super().__init__(reason)
        self.reason, self.kind = reason, kind


@dataclass(frozen=True)
class ResponseBounds:
    seconds: float
    line_bytes: int
    response_bytes: int

    def too_slow(self) -> ModelServerRefused:
        return ModelServerRefused(f"The model server did not answer within {self.seconds:g} seconds.", kind="timeout")


class _Watch:
    """One request's deadline: the socket it reads from, shut down once the deadline passes."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self.limit = TimeLimit(kill=self.expire, deadline=deadline)

    def connected(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace: the connection's socket, once it has one."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                self._socket = sock
                late = self.expired
            if late and sock is not None:
                _shut(sock)

    def expire(self) -> bool:
        with self._lock:
            self.expired = True
            sock = self._socket
        if sock is not None:
            _shut(sock)
        return True

    def end(self) -> None:
        self.limit.end()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed meanwhile: nobody reads from it any more
        sock.shutdown(socket.SHUT_RDWR)


class BoundedTransport(httpx.BaseTransport):
    """`inner` with `bounds` on every response, each request on a connection of its own (so that
    its socket is known, to be shut down at the deadline)."""

    def __init__(self, bounds: ResponseBounds, inner: httpx.BaseTransport | None = None) -> None:
        self.bounds = bounds
        self.inner = inner or httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        watch = _Watch(time.monotonic() + self.bounds.seconds)
        request.extensions["trace"] = watch.connected
        try:
            response = self.inner.handle_request(request)
        except httpx.HTTPError as error:
            watch.end()
            if watch.expired:
                raise self.bounds.too_slow() from error
            raise
        except BaseException:
            watch.end()
            raise
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedStream(response.stream, watch, self.bounds),
            extensions=response.extensions,
            request=request,
        )

    def close(self) -> None:
        self.inner.close()


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: Any, watch: _Watch, bounds: ResponseBounds) -> None:
        self.inner, self.watch, self.bounds = inner, watch, bounds

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        line = 0  # bytes since the last newline
        try:
            for chunk in self.inner:
                if self.watch.expired or time.monotonic() > self.watch.deadline:
                    raise self.bounds.too_slow()
                received += len(chunk)
                if received > self.bounds.response_bytes:
                    raise ModelServerRefused(
                        f"The model server sent more than {self.bounds.response_bytes:,} bytes in one answer.",
                        kind="too_large",
                    )
                line, longest = _lines(chunk, line, self.bounds.line_bytes)
                if longest > self.bounds.line_bytes:
                    raise ModelServerRefused(
                        f"The model server sent a line of more than {self.bounds.line_bytes:,} bytes.",
                        kind="too_large",
                    )
                yield chunk
        except httpx.HTTPError as error:
            if self.watch.expired:
                raise self.bounds.too_slow() from error
            raise
        # A body read to the end of its connection ends when the watchdog shuts it, as if whole.
        if self.watch.expired:
            raise self.bounds.too_slow()

    def close(self) -> None:
        self.watch.end()
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def _lines(chunk: bytes, carried: int, limit: int) -> tuple[int, int]:
    """The length of the line `chunk` leaves open (`carried` bytes of it came before), and of the
    longest line it holds part of."""
    first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
    if first < 0:
        return carried + len(chunk), carried + len(chunk)
    longest = max(carried + first, len(chunk) - last - 1)
    if last > first and len(chunk) > limit:
        longest = max(longest, *(len(part) for part in chunk[first + 1 : last].split(b"\n")))
    return len(chunk) - last - 1, longest


def refusal_in(error: BaseException) -> ModelServerRefused | None:
    """The bounds' refusal behind `error`, however deep the client wrapped it."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ModelServerRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
