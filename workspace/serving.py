"""The gunicorn worker of `make serve` (workspace/gunicorn.conf.py): gthread, made so that no client can
hold the threads everyone shares (README "Production", "Slow clients and health").

- `/healthz` is answered by threads of its own: the main loop peeks at a request that has arrived
  whole, and a bodiless `GET /healthz` goes to them instead of the pool, so a load balancer hears
  back while every pool thread runs someone's command.
- A connection that has sent nothing yet waits in the poller, not in a pool thread.
- Reads have deadlines: a request's headers must arrive within WORKSPACE_CLIENT_TIMEOUT_SECONDS of
  its first byte, and its body must start within that time and then keep coming at
  WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND on average. A thread blocked past its deadline is freed by
  shutting the socket's read side (the blocked `recv()` returns at once); a body cut off this way
  is answered 408 `request_body_timeout` (workspace/errors.py) and nothing it carried is stored.
- A response the client does not read for WORKSPACE_CLIENT_TIMEOUT_SECONDS ends the connection
  (the kernel's send timeout), so a download nobody reads does not hold its thread either.

Only `make serve` uses it; `runserver` (the demo) does not.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from functools import partial
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# How many requests for /healthz one worker process answers at once (each takes milliseconds; its
# slowest checks give up after 2 s).
HEALTH_THREADS = 2
# Enough of a request to see its request line and whether its headers have all arrived.
PEEK_BYTES = 4096
# How often the watchdog looks for reads past their deadline.
WATCH_SECONDS = 0.2
# A body is read in steps this big, so the deadline learns how much arrived as it arrives.
BODY_STEP = 64 * 1024

_BODY_HEADERS = re.compile(rb"\r\n(content-length|transfer-encoding)\s*:", re.IGNORECASE)


class RequestBodyTimeout(OSError):
    """The client stopped sending its body, or sent it slower than allowed; the read was cut off."""


class _Watch:
    """One read under a deadline (`deadline()` is asked each time, as it may move)."""

    __slots__ = ("deadline", "expired", "sock")

    def __init__(self, sock: socket.socket, deadline: Callable[[], float]) -> None:
        self.sock, self.deadline, self.expired = sock, deadline, False


class ReadDeadlines(threading.Thread):
    """Frees threads blocked reading from a client past their deadline: it shuts the socket's read
    side, so the blocked `recv()` returns at once, as if the client had closed."""

    def __init__(self) -> None:
        super().__init__(name="read-deadlines", daemon=True)
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()

    def watch(self, sock: socket.socket, deadline: Callable[[], float]) -> _Watch:
        watch = _Watch(sock, deadline)
        with self._lock:
            self._watches.add(watch)
        return watch

    def unwatch(self, watch: _Watch | None) -> None:
        """After this returns, the socket of `watch` is not shut by the watchdog."""
        if watch is not None:
            with self._lock:
                self._watches.discard(watch)

    def run(self) -> None:
        while True:
            time.sleep(WATCH_SECONDS)
            now = time.monotonic()
            with self._lock:
                due = [watch for watch in self._watches if watch.deadline() <= now]
                for watch in due:
                    self._watches.discard(watch)
                    watch.expired = True
                    with contextlib.suppress(OSError):  # already closed: nobody is blocked on it
                        watch.sock.shutdown(socket.SHUT_RD)


class DeadlineInput:
    """`wsgi.input` whose reads end in RequestBodyTimeout once the client stalls: the body must
    start within `timeout` seconds and then keep coming at `min_rate` bytes a second on average."""

    def __init__(
        self, inner: Any, sock: socket.socket, deadlines: ReadDeadlines, *, timeout: float, min_rate: int
    ) -> None:
        self.inner, self.sock, self.deadlines = inner, sock, deadlines
        self.timeout, self.min_rate = timeout, max(min_rate, 1)
        self.started: float | None = None
        self.received = 0
        self.cut_off = False

    def _deadline(self) -> float:
        return (self.started or 0.0) + self.timeout + self.received / self.min_rate

    def _guarded(self, read: Callable[[int], bytes], size: int) -> bytes:
        if self.cut_off:
            raise RequestBodyTimeout("the request body stopped arriving")
        if self.started is None:
            self.started = time.monotonic()
        watch = self.deadlines.watch(self.sock, self._deadline)
        try:
            data = read(size)
        finally:
            self.deadlines.unwatch(watch)
        if watch.expired:
            self.cut_off = True
            raise RequestBodyTimeout("the request body stopped arriving")
        self.received += len(data)
        return data

    def read(self, size: int | None = -1) -> bytes:
        parts: list[bytes] = []
        left = -1 if size is None or size < 0 else size
        while left != 0:
            chunk = self._guarded(self.inner.read, BODY_STEP if left < 0 else min(left, BODY_STEP))
            if not chunk:
                break
            parts.append(chunk)
            left = left if left < 0 else left - len(chunk)
        return b"".join(parts)

    def readline(self, size: int | None = -1) -> bytes:
        return self._guarded(self.inner.readline, -1 if size is None else size)

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        return list(self)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


class BoundedBodies:
    """The WSGI app with every request body read under a deadline (`DeadlineInput`)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], deadlines: ReadDeadlines, *, timeout: float, min_rate: int):
        self.app, self.deadlines, self.timeout, self.min_rate = app, deadlines, timeout, min_rate

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            environ["wsgi.input"] = DeadlineInput(
                environ["wsgi.input"], sock, self.deadlines, timeout=self.timeout, min_rate=self.min_rate
            )
        return self.app(environ, start_response)


def health_request(head: bytes, path: bytes) -> bool:
    """A whole bodiless `GET` (or `HEAD`) of `path`, headers and all, in the first bytes of a connection."""
    line_end = head.find(b"\r\n")
    if line_end < 0 or b"\r\n\r\n" not in head:
        return False
    parts = head[:line_end].split(b" ")
    if len(parts) != 3 or parts[0] not in (b"GET", b"HEAD") or not parts[2].startswith(b"HTTP/1."):
        return False
    target = parts[1].split(b"?", 1)[0]
    return target == path and not _BODY_HEADERS.search(head[line_end : head.find(b"\r\n\r\n") + 2])


class WorkspaceWorker(ThreadWorker):
    """gunicorn's gthread worker with health threads, waiting in the poller and read deadlines."""

    def init_process(self) -> None:
        self.health_pool = futures.ThreadPoolExecutor(max_workers=HEALTH_THREADS, thread_name_prefix="health")
        self.deadlines = ReadDeadlines()
        self.deadlines.start()
        self.reading = threading.local()
        super().init_process()  # loads the app, then runs the loop until the worker stops

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.conf import settings  # the app is loaded: Django is set up

        self.client_timeout = settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS
        self.health_path = f"{settings.WORKSPACE_ROOT_PATH}/healthz".encode()
        self.wsgi = BoundedBodies(
            self.wsgi,
            self.deadlines,
            timeout=self.client_timeout,
            min_rate=settings.WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND,
        )

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.health_pool.shutdown(wait=False)

    def handle_quit(self, sig: int, frame: Any) -> None:
        self.health_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    # -- where a connection goes (the main loop) --------------------------------------------------

    def enqueue_req(self, conn: Any) -> None:
        if not getattr(conn, "send_bounded", False):
            # A response write the client does not take within the timeout fails instead of blocking.
            seconds = max(int(self.client_timeout), 1)
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, 0))
            conn.send_bounded = True
        buffered = conn.parser is not None and conn.parser.unreader.buf.getvalue()
        if buffered:
            super().enqueue_req(conn)
            return
        try:
            head = conn.sock.recv(PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            self._wait_for_request(conn)
            return
        except OSError:
            head = b""  # the pool's thread meets the error and closes the connection
        conn.data_ready = True
        if head and health_request(head, self.health_path):
            done = self.health_pool.submit(self.handle, conn)
            done.add_done_callback(lambda fut: self.method_queue.defer(self.finish_request, conn, fut))
            return
        super().enqueue_req(conn)

    def _wait_for_request(self, conn: Any) -> None:
        # As gthread does with a connection that stays quiet, but at once: no thread waits for it.
        conn.sock.setblocking(False)
        conn.timeout = time.monotonic() + self.client_timeout
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    # -- the header deadline (a pool or health thread) ---------------------------------------------

    def handle(self, conn: Any) -> Any:
        started = time.monotonic()
        self.reading.watch = self.deadlines.watch(conn.sock, lambda: started + self.client_timeout)
        try:
            return super().handle(conn)
        finally:
            self.deadlines.unwatch(self.reading.watch)
            self.reading.watch = None

    def handle_request(self, req: Any, conn: Any) -> Any:
        # The headers are in: from here the body has its own deadline (BoundedBodies).
        self.deadlines.unwatch(getattr(self.reading, "watch", None))
        return super().handle_request(req, conn)
