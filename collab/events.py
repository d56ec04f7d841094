"""Server-sent events over the API (`Accept: text/event-stream`): the renderer that lets DRF accept
the type, one event's frame, and the streaming response every stream shares."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer

from collab.waits import Readable

Event = TypeVar("Event")


class EventStreamRenderer(BaseRenderer):
    """`Accept: text/event-stream`: the view streams events itself; refusals still come as JSON."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        # Only refusals get here (the stream itself bypasses renderers): they stay JSON, and say so,
        # so that what reads the answer (a client, the request log) reads it as the JSON it is.
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return json.dumps(data).encode()


def event_frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def event_stream(frames: Iterator[bytes | Readable]) -> StreamingHttpResponse:
    """The streaming answer of `frames`. Under ASGI (workspace/serving.py) they are pulled a frame
    at a time, their waits spent on the event loop (collab.waits). Closing the response closes
    `frames`, started or not."""
    response = StreamingHttpResponse(frames, content_type="text/event-stream")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # proxies pass each event on as it comes
    return response


def event_schema(*events: str) -> dict[str, Any]:
    """The OpenAPI schema of one event of a stream: its name, one of `events`, and a JSON `data`
    line (said in words: OpenAPI 3.0 has no `contentMediaType`)."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": list(events)},
            "data": {"type": "string", "description": "a JSON document"},
        },
    }


def frames_to_the_end(
    events: Iterator[Event],
    frames: Callable[[Iterator[Event]], Iterator[bytes]],
    *,
    refusals: tuple[type[Exception], ...],
    refusal_body: Callable[[Exception], dict[str, Any]],
) -> Iterator[bytes]:
    """`frames(events)`, ended by an `error` event (`refusal_body`) when one of `refusals` stops the
    work. A reader who leaves closes this stream, but the work behind `events` still runs to its end
    (within its own limits), so what it stores is never lost with the page."""
    try:
        yield from frames(events)
    except GeneratorExit:
        with contextlib.suppress(*refusals):
            for _event in events:
                pass
        raise
    except refusals as exc:
        yield event_frame("error", refusal_body(exc))
