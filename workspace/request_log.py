"""One JSON line per request on `workspace.requests`, so an operator can count refusals by code and dimension.

A quota's 507 is a refusal the person caused: on `django.request` it is a WARNING, as a 4xx is, not an ERROR.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.log import log_response

from collab.edge import STATUS_BY_KIND
from collab.errors import QuotaExceeded
from collab.later import Later

logger = logging.getLogger("workspace.requests")

# Error bodies are small; a larger JSON body is a payload, not an error, and is not parsed.
_MAX_ERROR_BODY = 64 * 1024
# No answer of ours but a quota's refusal has this status (collab.edge).
_QUOTA_STATUS = STATUS_BY_KIND[QuotaExceeded]


def _error_fields(response: HttpResponse) -> dict[str, Any]:
    if response.status_code < 400:
        return {}
    body = getattr(response, "refusal_body", None)  # a page's refusal (collab.edge.refusal_page)
    if body is None:
        body = _json_body(response)
    if not isinstance(body, dict):
        return {}
    return {key: body[key] for key in ("error", "dimension") if isinstance(body.get(key), str)}


def _json_body(response: HttpResponse) -> Any:
    if getattr(response, "streaming", False):
        return None
    if not response.get("Content-Type", "").startswith("application/json"):
        return None
    content = response.content
    if len(content) > _MAX_ERROR_BODY:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def request_record(request: HttpRequest, response: HttpResponse, duration_ms: float) -> dict[str, Any]:
    identity = getattr(request, "identity", None)
    return {
        "method": request.method,
        "path": request.path,
        "status": response.status_code,
        "duration_ms": round(duration_ms, 1),
        "user_id": getattr(identity, "user_id", None),
        **_error_fields(response),
    }


class RequestLogMiddleware:
    """Outermost, so the duration covers every other middleware and a 401 from identity is logged."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        if isinstance(response, Later):
            # Its status is the work's to decide: logged once the work has (its duration included).
            response.when_resolved(lambda final: _logged(request, final, started))
        else:
            _logged(request, response, started)
        return response


def _logged(request: HttpRequest, response: HttpResponse, started: float) -> None:
    if response.status_code == _QUOTA_STATUS:
        _refusal_to_django(request, response)
    if logger.isEnabledFor(logging.INFO):
        record = request_record(request, response, (time.perf_counter() - started) * 1000)
        logger.info(json.dumps(record))


def _refusal_to_django(request: HttpRequest, response: HttpResponse) -> None:
    """Django logs every 5xx on `django.request` as an ERROR, a fault of the server; a quota's 507
    is a refusal the person caused, so it is logged as Django logs a 4xx (WARNING), once: Django
    leaves a response alone that was logged already (`_has_been_logged`)."""
    log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request, level="warning")
