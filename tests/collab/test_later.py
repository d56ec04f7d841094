"""Answers decided once long work ends (collab.later): the same answer run in the request's thread or
on the event loop, with what the middleware set on the stand-in, and what it holds given back once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpResponse, JsonResponse
from django.test import RequestFactory

from collab.later import Later
from collab.waits import Readable, request_threads
from tests.fixtures.loops import run_on_its_own_loop

# Each step on the request threads looks over the connection its thread holds (one a live server of
# an earlier test may have opened): database access, though these tests store nothing.
pytestmark = pytest.mark.django_db


def _work(seen: list[str]) -> Iterator[Any]:
    seen.append("started")
    yield Readable((), 0.01)
    yield "the outcome"


def _later(work: Iterator[Any], released: list[str]) -> Later:
    later = Later(
        work,
        request=RequestFactory().post("/a/notebook/items/1/exec"),
        respond=lambda last: JsonResponse({"last": last}, status=207),
        fail=lambda exc: JsonResponse({"error": str(exc)}, status=409),
        release=lambda: released.append("released"),
    )
    # What the middleware around the view sets on the stand-in.
    later["X-Frame-Options"] = "DENY"
    later.set_cookie("csrftoken", "t0ken")
    return later


async def _on_loop(later: Later) -> HttpResponse:
    loop = asyncio.get_running_loop()
    return await later.resolved_on_loop(lambda fn, *args: loop.run_in_executor(request_threads(), fn, *args))


def test_on_the_loop_the_work_decides_the_status_and_the_middleware_headers_stay():
    # Given long work that waits once, then ends with its outcome
    seen: list[str] = []
    released: list[str] = []
    later = _later(_work(seen), released)
    logged: list[int] = []
    later.when_resolved(lambda final: logged.append(final.status_code))
    # When it is finished on the event loop
    final = run_on_its_own_loop(_on_loop(later))
    # Then the answer is the work's, with the stand-in's headers and cookies, logged once and released once
    assert (final.status_code, final.content) == (207, b'{"last": "the outcome"}')
    assert final["X-Frame-Options"] == "DENY"
    assert final.cookies["csrftoken"].value == "t0ken"
    assert logged == [207]
    assert released == ["released"]
    later.close()
    assert released == ["released"]


def test_in_the_requests_thread_the_same_work_gives_the_same_answer():
    seen: list[str] = []
    released: list[str] = []
    final = _later(_work(seen), released).resolved_here()
    assert (final.status_code, final.content) == (207, b'{"last": "the outcome"}')
    assert released == ["released"]


def test_work_that_raises_a_refusal_is_answered_by_fail():
    def refused() -> Iterator[Any]:
        yield Readable((), 0.01)
        raise ValueError("the sandbox was closed")

    released: list[str] = []
    final = run_on_its_own_loop(_on_loop(_later(refused(), released)))
    assert (final.status_code, final.content) == (409, b'{"error": "the sandbox was closed"}')
    assert released == ["released"]


def test_work_never_started_is_closed_and_gives_back_what_it_holds():
    # Given a Later whose client left before the work started
    seen: list[str] = []
    released: list[str] = []
    later = _later(_work(seen), released)
    # When the response is closed / Then nothing ran and what it holds went back
    later.close()
    assert seen == []
    assert released == ["released"]
