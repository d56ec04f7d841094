"""How an app process serves (`make serve`, `make run`): Django's ASGI handler, made so that no
connection holds a thread (README "Production", docs/ARCHITECTURE.md §11).

- Connections wait on the event loop: a request's headers (the server's header timeout,
  workspace/uvicorn_worker.py), its body (read here under deadlines: it must start within
  WORKSPACE_CLIENT_TIMEOUT_SECONDS and then keep coming at WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND,
  else 408 `request_body_timeout`; one larger than its view takes, `collab.bodies`, is 413 before
  it is read), a streamed answer the client reads slowly (a send that waits longer than
  WORKSPACE_CLIENT_TIMEOUT_SECONDS ends the connection), a kept-alive connection.
- Sync work runs on a fixed pool of threads (`collab.waits.request_threads`), the whole middleware
  chain and view of a request in one step, as under WSGI: each thread keeps its database
  connection (DATABASE_CONN_MAX_AGE), which Django's per-request threads could not.
- Long work costs no thread while it waits: a streamed answer is pulled a chunk at a time, and a
  command's wait for output is the loop's (`collab.waits.driven`); an answer known only at the
  end (`collab.later.Later`) is finished on the loop too. Model turns run on threads of their own.
- On shutdown (`drain`) no new long work is taken and running commands are stopped, so their
  streams end with a result that says why, before the server closes the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import CancelledError, Executor, Future
from contextlib import aclosing
from tempfile import SpooledTemporaryFile
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted, RequestDataTooBig
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponse
from django.urls import Resolver404, resolve, set_script_prefix

from collab import capacity
from collab.api import WEBSOCKET_SCOPE_KEY
from collab.bodies import body_limit
from collab.later import Later
from collab.waits import driven, long_work_threads, request_threads

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


# The methods whose requests carry a body a view reads.
_WITH_BODIES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class _Refused(Exception):
    """A request answered before its view: `answer(request, workspace.errors)` is the answer."""

    def __init__(self, answer: Callable[[Any, Any], HttpResponse]) -> None:
        self.answer = answer


class ClientTooSlow(Exception):
    """The client took no more of the answer for WORKSPACE_CLIENT_TIMEOUT_SECONDS: the connection ends."""


class WorkspaceASGIHandler(ASGIHandler):
    """Django's ASGIHandler with one sync middleware chain run on the request threads (see the module)."""

    def __init__(self) -> None:
        base.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.handle(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket's handshake runs as a GET of its path through the middleware chain and its
        view, on a request thread, so it is authenticated, authorised and logged as any request;
        a view that says yes (`collab.api.WebSocketAccepted`) is handed the socket, on the loop.
        Any other answer is sent as the handshake's HTTP answer (a stranger's 404, a 403...)."""
        if (await receive())["type"] != "websocket.connect":
            return
        context = contextvars.copy_context()
        threads = request_threads()
        handshake = {**scope, "type": "http", "method": "GET", WEBSOCKET_SCOPE_KEY: True}
        served = threads.submit(context.run, self._served, handshake, SpooledTemporaryFile())  # noqa: SIM115
        response = await asyncio.wrap_future(served)
        try:
            attach = getattr(response, "websocket_attach", None)
            if attach is None:
                await self._denied(scope, response, send)
                return
        finally:
            await asyncio.shield(asyncio.wrap_future(threads.submit(context.run, response.close)))
        await attach(receive, send)

    @staticmethod
    async def _denied(scope: Scope, response: HttpResponse, send: Send) -> None:
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})  # the server answers 403
            return
        headers = [(str(header).encode("ascii"), str(value).encode("latin1")) for header, value in response.items()]
        await send({"type": "websocket.http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": response.content})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await drain()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        context = contextvars.copy_context()
        long, body_bytes = self._route(scope)
        try:
            body_file = await self._read_body(scope, receive, limit=body_bytes)
        except RequestAborted:
            return
        except _Refused as refusal:
            await self._refuse(scope, refusal, send, context)
            return
        # Long work that holds a thread (collab.capacity.runs_long) runs, request and all, on the
        # long-work threads, as many at once as there are, so that it never takes a request thread.
        ticket = None
        if long:
            try:
                ticket = capacity.long_work.ticket()
            except (capacity.ServerBusy, capacity.ServerStopping) as busy:
                refusal = _Refused(functools.partial(_answered_refused, busy))
            else:
                refusal = None
            if refusal is not None:
                body_file.close()
                await self._refuse(scope, refusal, send, context)
                return
        threads = long_work_threads() if ticket else request_threads()

        def run(function: Callable[..., Any], *args: Any) -> Future[Any]:
            return threads.submit(context.run, function, *args)

        served = run(self._served, scope, body_file)
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(self._answered(served, send, run, pulled_on=threads if ticket else None)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RequestAborted, ClientTooSlow):
                    await task
            # Whatever ended the request, its response is closed (what it holds given back, the
            # request_finished signal sent) once the view is done with it.
            await asyncio.shield(asyncio.wrap_future(threads.submit(self._closed, served, context, ticket)))
            body_file.close()

    @staticmethod
    def _route(scope: Scope) -> tuple[bool, int]:
        """Whether the request is long work (`collab.capacity.runs_long`), and the most bytes of
        body its view reads (`collab.bodies`): known from its path before its body is read."""
        if scope["method"] not in _WITH_BODIES:
            return False, settings.WORKSPACE_MAX_REQUEST_BODY_BYTES
        try:
            view = resolve(scope["path"].removeprefix(get_script_prefix(scope).rstrip("/"))).func
        except Resolver404:
            return False, settings.WORKSPACE_MAX_REQUEST_BODY_BYTES
        return capacity.is_long_work(view, scope["method"]), body_limit(view)

    async def _refuse(self, scope: Scope, refusal: _Refused, send: Send, context: contextvars.Context) -> None:
        threads = request_threads()
        response = await asyncio.wrap_future(threads.submit(context.run, self._refusal, scope, refusal))
        try:
            with contextlib.suppress(ClientTooSlow):
                await self.send_response(response, send)
        finally:
            await asyncio.shield(asyncio.wrap_future(threads.submit(context.run, response.close)))

    def _served(self, scope: Scope, body_file: Any) -> HttpResponse:
        """The request through the sync middleware chain and its view, as WSGI would run it."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            return error_response
        request.later_on_the_loop = True
        response = self.get_response(request)
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        return response

    @staticmethod
    def _closed(served: Future[HttpResponse], context: contextvars.Context, ticket: capacity.Ticket | None) -> None:
        try:
            context.run(served.result().close)
        except CancelledError:
            pass  # the client left before a thread took the request: it never ran
        except Exception:
            logger.exception("a request failed outside its middleware")
        finally:
            if ticket is not None:
                ticket.release()

    async def _answered(
        self, served: Future[HttpResponse], send: Send, run: Callable[..., Future[Any]], *, pulled_on: Executor | None
    ) -> None:
        response = await asyncio.wrap_future(served)
        if isinstance(response, Later):
            response = await response.resolved_on_loop(lambda *call: asyncio.wrap_future(run(*call)))
        await self.send_response(response, send, pulled_on=pulled_on)

    def _refusal(self, scope: Scope, refusal: _Refused) -> HttpResponse:
        from workspace import errors  # the site's error answers (page or JSON), loaded with Django

        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, SpooledTemporaryFile())  # noqa: SIM115 - the request closes it
        response = error_response if request is None else refusal.answer(request, errors)
        # What is left of an unread body would be read as the next request: the connection ends here.
        response["Connection"] = "close"
        return response

    async def _read_body(self, scope: Scope, receive: Receive, *, limit: int) -> SpooledTemporaryFile[bytes]:
        """The body, at most `limit` bytes, spooled to disk past FILE_UPLOAD_MAX_MEMORY_SIZE, read
        under deadlines (module docstring)."""
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            raise _Refused(lambda request, errors: errors.bad_request(request, RequestDataTooBig()))
        timeout = settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS
        rate = max(settings.WORKSPACE_CLIENT_MIN_BYTES_PER_SECOND, 1)
        started = time.monotonic()
        received = 0
        # Closed by `handle` once the request is done, or here on a failure.
        body_file: SpooledTemporaryFile[bytes] = SpooledTemporaryFile(  # noqa: SIM115
            max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b"
        )
        try:
            while True:
                left = started + timeout + received / rate - time.monotonic()
                try:
                    async with asyncio.timeout(max(left, 0.0)):
                        message = await receive()
                except TimeoutError:
                    raise _Refused(lambda request, errors: errors.body_timeout(request)) from None
                if message["type"] == "http.disconnect":
                    raise RequestAborted()
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > limit:
                    raise _Refused(lambda request, errors: errors.bad_request(request, RequestDataTooBig()))
                body_file.write(chunk)
                if not message.get("more_body", False):
                    break
        except BaseException:
            body_file.close()
            raise
        body_file.seek(0)
        return body_file

    async def send_response(  # type: ignore[override]
        self, response: HttpResponse, send: Send, *, pulled_on: Executor | None = None
    ) -> None:
        """Django's, with a deadline on each send, and a sync iterator pulled a chunk at a time on
        the request threads (Django would read it whole into memory first), waits included, or on
        `pulled_on` (the long-work threads its request ran on)."""
        timeout = settings.WORKSPACE_CLIENT_TIMEOUT_SECONDS

        async def sent(message: MutableMapping[str, Any]) -> None:
            try:
                async with asyncio.timeout(timeout):
                    await send(message)
            except TimeoutError:
                raise ClientTooSlow() from None

        headers = [(str(header).encode("ascii"), str(value).encode("latin1")) for header, value in response.items()]
        headers += [
            (b"Set-Cookie", cookie.output(header="").encode("ascii").strip()) for cookie in response.cookies.values()
        ]
        await sent({"type": "http.response.start", "status": response.status_code, "headers": headers})
        if not response.streaming:
            for chunk, last in self.chunk_bytes(response.content):
                await sent({"type": "http.response.body", "body": chunk, "more_body": not last})
            return
        if response.is_async:
            parts: Any = aiter(response)
        else:
            # The iterator itself, not `streaming_content` (which turns each item into bytes): its
            # waits (`Readable`) must reach `driven`, which spends them on the loop.
            parts = driven(response._iterator, pool=pulled_on)
        async with aclosing(parts) as content:
            async for part in content:
                for chunk, _ in self.chunk_bytes(response.make_bytes(part)):
                    await sent({"type": "http.response.body", "body": chunk, "more_body": True})
        await sent({"type": "http.response.body"})


async def drain() -> None:
    """Stops taking long work and stops the commands this process runs, so that their streams end
    with a result that says why (README "Production"). The server calls it as it begins to shut
    down, before it waits for the connections to end; once is enough, twice does no harm."""
    if not capacity.stopping():
        await asyncio.get_running_loop().run_in_executor(request_threads(), capacity.stop_taking)


def _answered_refused(
    refused: capacity.ServerBusy | capacity.ServerStopping, request: Any, errors: Any
) -> HttpResponse:
    return errors.refused(request, refused)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
