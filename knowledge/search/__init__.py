"""Lexical retrieval behind one interface: PostgreSQL full-text search or SQLite FTS5."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from knowledge.search.base import ChunkIndex, SearchHit, search_terms
from knowledge.search.postgres import PostgresChunkIndex
from knowledge.search.sqlite import Fts5ChunkIndex

__all__ = ["ChunkIndex", "SearchHit", "get_chunk_index", "search_terms"]

_BY_VENDOR: dict[str, type[ChunkIndex]] = {"postgresql": PostgresChunkIndex, "sqlite": Fts5ChunkIndex}


def get_chunk_index() -> ChunkIndex:
    """The index for the database in use; the migrations built its table or column."""
    try:
        return _BY_VENDOR[connection.vendor]()
    except KeyError:
        raise ImproperlyConfigured(
            f"The knowledge base searches with PostgreSQL or SQLite only, not {connection.vendor!r}."
        ) from None
