"""Answers that are known only once long work ends, without a thread waiting for them.

A view checks what it can at once (who asks, the body, the person's slot, the quota gate) and
returns a `Later`: the work still to do (a generator; a command's run waits in `Readable`s, a
model's turn is one step on the long-work threads) and how to turn its last event into the answer.
The middleware around the view handles the `Later` like any response (headers, cookies); the
ASGI handler (workspace/serving.py) then runs the work on the event loop (`collab.waits.driven`)
and sends the answer with the status the work decided, 200 or 507 alike. Everywhere else (the
test client, a WSGI server) `LaterResponses` runs it at once in the request's own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any

from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest, HttpResponse

from collab.waits import driven

_NOTHING: Any = object()


class Later(HttpResponse):
    """A response whose status and body `respond(last event of work)` decides once `work` has
    ended (`fail(exception)` when it raised; what `fail` does not answer is the request's uncaught
    exception). `release` runs once whichever way it ends, the work never started included (the
    client left first)."""

    def __init__(
        self,
        work: Iterator[Any],
        *,
        request: HttpRequest,
        respond: Callable[[Any], HttpResponse],
        fail: Callable[[Exception], HttpResponse],
        pool: Executor | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(status=200)
        self.work, self.pool, self.request = work, pool, request
        self._respond, self._fail, self._release = respond, fail, release
        self.final: HttpResponse | None = None
        self._resolved_callbacks: list[Callable[[HttpResponse], None]] = []

    def when_resolved(self, callback: Callable[[HttpResponse], None]) -> None:
        """`callback(final response)` once the work decided it (the request log waits for it)."""
        self._resolved_callbacks.append(callback)

    def resolved_here(self) -> HttpResponse:
        """Runs the work in this thread, blocking where it waits."""
        last = _NOTHING
        try:
            for last in self.work:  # noqa: B007 - only the last event decides the answer
                pass
        except Exception as exc:
            return self._finished(self._fail(exc))
        finally:
            self._give_back()
        return self._finished(self._respond(last))

    async def resolved_on_loop(self, run: Callable[..., Any]) -> HttpResponse:
        """Runs the work on the event loop (`collab.waits.driven`); `run(fn, *args)` runs sync code
        on a request thread, in the request's context (the answer's rendering, a failure's)."""
        last = _NOTHING
        try:
            async for last in driven(self.work, pool=self.pool):  # noqa: B007
                pass
        except Exception as exc:
            return await run(self._finished_by, self._failed_on_loop, exc)
        finally:
            self._give_back()
        return await run(self._finished_by, self._respond, last)

    def _finished_by(self, answer: Callable[[Any], HttpResponse], value: Any) -> HttpResponse:
        return self._finished(answer(value))

    def _failed_on_loop(self, exc: Exception) -> HttpResponse:
        try:
            return self._fail(exc)
        except Exception as unknown:
            # Not a refusal `fail` knows (a bug): answered as a view's uncaught exception is (logged,
            # signalled, the site's 500), as `resolved_here` lets the middleware around it do.
            return response_for_exception(self.request, unknown)

    def _finished(self, final: HttpResponse) -> HttpResponse:
        """`final`, with what the middleware set on this stand-in (security headers, cookies) added."""
        for header, value in self.items():
            if header.lower() not in ("content-type", "content-length") and not final.has_header(header):
                final[header] = value
        for name, cookie in self.cookies.items():
            final.cookies.setdefault(name, cookie)
        self.final = final
        for callback in self._resolved_callbacks:
            callback(final)
        return final

    def _give_back(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def close(self) -> None:
        # A client that left before the work started: the work is closed unstarted and what it
        # holds is given back here.
        close = getattr(self.work, "close", None)
        if close is not None:
            close()
        self._give_back()
        if self.final is not None:
            self.final.close()
        super().close()


class LaterResponses:
    """Outermost middleware: a `Later` is run at once in this thread unless the ASGI handler, which
    runs it on the event loop, serves the request (it sets `request.later_on_the_loop`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if isinstance(response, Later) and not getattr(request, "later_on_the_loop", False):
            return response.resolved_here()
        return response
