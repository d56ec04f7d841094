"""Reranking: a second, closer look at the first stage's best passages (README "Reranking").

The first stage (words, and meaning where embeddings are configured) ranks every chunk of the
asker's collections cheaply; among thousands of chunks the passage that answers is often in its
first twenty but not first. A reranker reads the question beside each of those passages and
scores how well the passage answers it; they are then asked in that order. Without one the order
is the first stage's, unchanged, and a reranker that fails leaves it unchanged too, with a log
line: an answer never waits on, nor fails for, the second look.

The one kind here is an endpoint the deployment names (WORKSPACE_RERANK_BASE_URL): `POST
<base>/rerank` with `{model, query, documents, top_n}`, answered `{results: [{index,
relevance_score}]}`, the shape Cohere, Jina, vLLM and llama.cpp's server share.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

# An answer of more than this many bytes is not one of a few scores: it is read no further.
MAX_RESPONSE_BYTES = 1024 * 1024
CONNECT_SECONDS = 2.0


class RerankError(Exception):
    """The reranker gave no usable scores; `reason` is one sentence for a log (no key in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Reranker(Protocol):
    name: str

    def scores(self, *, question: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in the texts' order; higher answers the question better."""
        ...


@dataclass(frozen=True)
class RemoteReranker:
    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout: float = 5.0

    @property
    def name(self) -> str:
        return f"rerank:{self.model or self.base_url}"

    def scores(self, *, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "query": question, "documents": list(texts), "top_n": len(texts)}
        try:
            with (
                httpx.Client(
                    timeout=httpx.Timeout(self.timeout, connect=min(CONNECT_SECONDS, self.timeout)),
                    follow_redirects=False,
                ) as client,
                client.stream("POST", f"{self.base_url.rstrip('/')}/rerank", json=body, headers=headers) as response,
            ):
                if response.status_code != 200:
                    raise RerankError(f"The reranker answered HTTP {response.status_code}.")
                raw = _bounded_body(response)
        except httpx.TimeoutException:
            raise RerankError(f"The reranker did not answer within {self.timeout:g} s.") from None
        except httpx.HTTPError as error:
            raise RerankError(f"The reranker could not be reached ({type(error).__name__}).") from None
        return _scores(raw, len(texts))


def _bounded_body(response: httpx.Response) -> bytes:
    received = bytearray()
    for piece in response.iter_bytes():
        received += piece
        if len(received) > MAX_RESPONSE_BYTES:
            raise RerankError(f"The reranker's answer is larger than {MAX_RESPONSE_BYTES} bytes.")
    return bytes(received)


def _scores(raw: bytes, expected: int) -> list[float]:
    """Each document's score by its index, checked: every index once, finite numbers."""
    try:
        results = json.loads(raw)["results"]
        scored = {int(result["index"]): float(result["relevance_score"]) for result in results}
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise RerankError(f"The reranker's answer is not the rerank protocol ({type(error).__name__}).") from None
    if sorted(scored) != list(range(expected)) or not all(math.isfinite(score) for score in scored.values()):
        raise RerankError("The reranker did not score every passage once with a number.")
    return [scored[index] for index in range(expected)]


_lock = threading.Lock()
_cache: dict[tuple[str, ...], Reranker] = {}


def get_reranker() -> Reranker | None:
    """The configured reranker, built once per process; None when none is configured."""
    base_url = settings.WORKSPACE_RERANK_BASE_URL
    if not base_url:
        return None
    model, api_key = settings.WORKSPACE_RERANK_MODEL, settings.WORKSPACE_RERANK_API_KEY
    timeout = settings.WORKSPACE_RERANK_TIMEOUT_SECONDS
    key = (base_url, model, api_key, str(timeout))
    with _lock:
        if key not in _cache:
            _cache[key] = RemoteReranker(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
        return _cache[key]


def check_rerank_settings() -> None:
    """Start-up check: a reranker's address is an http(s) URL, its timeout and depth positive."""
    base_url = settings.WORKSPACE_RERANK_BASE_URL
    if base_url and (urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).hostname):
        raise ImproperlyConfigured(f"WORKSPACE_RERANK_BASE_URL must be an http(s) URL, not {base_url!r}.")
    if settings.WORKSPACE_RERANK_TIMEOUT_SECONDS <= 0:
        raise ImproperlyConfigured("WORKSPACE_RERANK_TIMEOUT_SECONDS must be more than 0.")
    if settings.WORKSPACE_RERANK_DEPTH < 1:
        raise ImproperlyConfigured("WORKSPACE_RERANK_DEPTH must be at least 1.")


Ranked = TypeVar("Ranked")


def reranked(*, question: str, ranked: Sequence[Ranked], text_of: Callable[[Ranked], str]) -> list[Ranked]:
    """`ranked` with its first WORKSPACE_RERANK_DEPTH items in the reranker's order (ties keep the
    first stage's), the rest after them as they were; unchanged without a reranker or when it fails."""
    reranker = get_reranker()
    head = list(ranked[: settings.WORKSPACE_RERANK_DEPTH])
    if reranker is None or len(head) < 2:
        return list(ranked)
    try:
        scores = reranker.scores(question=question, texts=[text_of(item) for item in head])
    except RerankError as error:
        logger.warning("reranking skipped, the first stage's order kept: %s", error.reason)
        return list(ranked)
    order = sorted(range(len(head)), key=lambda index: (-scores[index], index))
    return [head[index] for index in order] + list(ranked[len(head) :])
