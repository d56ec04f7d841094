"""The retrieval interface and the query-term rules both implementations share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MAX_TERMS = 32

# Questions are full of these; matching on them ranks by grammar instead of subject.
_STOPWORD_TEXT = (
    "a about an and are as at be been but by can could do does did for from had has have how i if in into is it "
    "its me my no not of on or our should so than that the their them then there these they this to was we were "
    "what when where which who why will with would you your"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchHit:
    chunk_id: str
    score: float
    # The cosine between the question and the chunk where dense retrieval took part and the chunk
    # has a vector; None for lexical search alone and for chunks still pending.
    similarity: float | None = None


def search_terms(question: str) -> list[str]:
    """Distinct lower-case words worth matching, in order; punctuation can never reach a query."""
    words = (word.lower() for word in _WORD.findall(question))
    kept = [word for word in words if len(word) > 1 and word not in STOPWORDS]
    return list(dict.fromkeys(kept))[:MAX_TERMS]


class ChunkIndex(Protocol):
    """Where chunks become searchable. Calls run inside the caller's transaction."""

    # The share of this index's score when it is fused with dense retrieval (knowledge/search/hybrid.py).
    fusion_weight: float

    def index_chunks(self, *, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Adds (chunk_id, document_id, collection_id, text) rows; the text is `Chunk.searchable_text`."""
        ...

    def forget_document(self, *, document_id: str) -> None:
        """Drops every indexed chunk of a document (before its chunks are replaced)."""
        ...

    def forget_collection(self, *, collection_id: str) -> None:
        """Drops every indexed chunk of a collection (before the collection is deleted)."""
        ...

    def search(self, *, question: str, collection_ids: Sequence[str], limit: int) -> list[SearchHit]:
        """Best first; any chunk matching any term qualifies, ranking decides."""
        ...
