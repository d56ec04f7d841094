"""Embedding providers: the deployment names one (an OpenAI-compatible endpoint or a local model on
disk) or none, and the knowledge base then retrieves by meaning as well as by words.

A provider turns texts into unit-length float32 rows. `model` names the vector space: vectors are
stored with it, and only vectors of the configured model are ever compared, so switching providers
re-embeds (the worker's backfill) instead of mixing spaces.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from threadpoolctl import ThreadpoolController

# Texts per provider call: bounds a request's size and a local batch's memory.
BATCH = 32
# What a local model directory holds (as sentence-transformers saves it).
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class EmbeddingError(Exception):
    """The provider could not embed (down, slow, refused, or an answer that is not vectors).

    The message is one readable sentence and never carries the API key."""


class Embedder(Protocol):
    model: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row per text, in order; raises EmbeddingError."""
        ...


_lock = threading.Lock()
_cache: dict[tuple[str, ...], Embedder] = {}


def get_embedder() -> Embedder | None:
    """The configured provider, built once per process (a local model is loaded on its first use)."""
    base_url, path = settings.WORKSPACE_EMBEDDINGS_BASE_URL, settings.WORKSPACE_EMBEDDINGS_PATH
    if not base_url and not path:
        return None
    model, api_key = settings.WORKSPACE_EMBEDDINGS_MODEL, settings.WORKSPACE_EMBEDDINGS_API_KEY
    timeout = settings.WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS
    key = (base_url, model, api_key, path, str(timeout))
    with _lock:
        if key not in _cache:
            _cache[key] = _build(base_url=base_url, model=model, api_key=api_key, path=path, timeout=timeout)
        return _cache[key]


def check_embedding_settings() -> None:
    """Start-up check: one provider named whole, or none (a question never meets a bad setting)."""
    _checked(
        base_url=settings.WORKSPACE_EMBEDDINGS_BASE_URL,
        model=settings.WORKSPACE_EMBEDDINGS_MODEL,
        path=settings.WORKSPACE_EMBEDDINGS_PATH,
        timeout=settings.WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS,
    )


def _checked(*, base_url: str, model: str, path: str, timeout: float) -> None:
    if base_url and path:
        raise ImproperlyConfigured(
            "Name one embedding provider: WORKSPACE_EMBEDDINGS_BASE_URL or WORKSPACE_EMBEDDINGS_PATH, not both."
        )
    if base_url:
        if urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).hostname:
            raise ImproperlyConfigured(
                "WORKSPACE_EMBEDDINGS_BASE_URL must be an http:// or https:// URL, such as http://127.0.0.1:11434/v1."
            )
        if not model:
            raise ImproperlyConfigured(
                "WORKSPACE_EMBEDDINGS_BASE_URL is set, so WORKSPACE_EMBEDDINGS_MODEL must name the model."
            )
        if timeout <= 0:
            raise ImproperlyConfigured("WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS must be above 0.")
    if path:
        for name in MODEL_FILES:
            if not (Path(path) / name).is_file():
                raise ImproperlyConfigured(
                    f"WORKSPACE_EMBEDDINGS_PATH {path!r} is not a sentence-transformers model directory: no {name}."
                )


def _build(*, base_url: str, model: str, api_key: str, path: str, timeout: float) -> Embedder:
    _checked(base_url=base_url, model=model, path=path, timeout=timeout)
    if base_url:
        from knowledge.embeddings.remote import RemoteEmbedder

        return RemoteEmbedder(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
    from knowledge.embeddings.local import LocalEmbedder

    return LocalEmbedder(path)


def embed_in_batches(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    rows = [embedder.embed(texts[start : start + BATCH]) for start in range(0, len(texts), BATCH)]
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


_controller: ThreadpoolController | None = None


def one_blas_thread() -> contextlib.AbstractContextManager:
    """NumPy's BLAS held to one thread for a question's small products: on a busy machine more
    threads wait on each other (a question took 0.4 s with the default pool, 0.03 s with one). The
    controller is found once per process: finding the loaded BLAS libraries walks every shared
    object in the process, 1 to 4 ms that each question paid before."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)
