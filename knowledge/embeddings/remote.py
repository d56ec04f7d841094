"""Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (Ollama, vLLM, llama.cpp's server,
a hosted API), through the pinned `openai` client and the model provider's failure mapping
(knowledge/llm.py): every failure is one readable EmbeddingError, and the key goes to the endpoint
in the Authorization header and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import openai

from knowledge.embeddings import EmbeddingError, unit_rows
from knowledge.llm import NO_KEY, ProviderConfig, ProviderError, failures_mapped

# Connecting takes no longer than this even where the whole call may take longer.
CONNECT_SECONDS = 5.0
_NOT_VECTORS = "The embedding server answered with something other than one vector per text."


class RemoteEmbedder:
    """No retries here: a question falls back to words at once, and ingest leaves its chunks
    pending for the worker's backfill, which is the retry."""

    def __init__(self, *, base_url: str, model: str, api_key: str, timeout: float) -> None:
        self.model = f"openai:{model}"
        self._config = ProviderConfig(
            base_url=base_url,
            model=model,
            api_key=api_key,
            connect_timeout=min(CONNECT_SECONDS, timeout),
            timeout=timeout,
        )
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=self._config.connect_timeout),
        )

    def __repr__(self) -> str:
        return f"RemoteEmbedder({self._config!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            with failures_mapped(self._config):
                response = self._client.embeddings.create(
                    model=self._config.model, input=list(texts), encoding_format="float"
                )
                vectors = _vectors(response, len(texts))
        except ProviderError as error:
            raise EmbeddingError(error.reason.replace("model server", "embedding server")) from None
        return unit_rows(np.asarray(vectors, dtype=np.float32))


def _vectors(response: Any, expected: int) -> list[list[float]]:
    """The vectors in input order, checked: one per text, all of one width, finite numbers."""
    rows = sorted(getattr(response, "data", None) or (), key=lambda item: getattr(item, "index", 0))
    vectors = [getattr(row, "embedding", None) for row in rows]
    if len(vectors) != expected or not all(isinstance(vector, list) and vector for vector in vectors):
        raise EmbeddingError(_NOT_VECTORS)
    width = len(vectors[0])
    for vector in vectors:
        if len(vector) != width or not all(isinstance(value, int | float) and math.isfinite(value) for value in vector):
            raise EmbeddingError(_NOT_VECTORS)
    return vectors
