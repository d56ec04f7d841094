"""How a document's blocks become chunks: passages of one section and one page, blocks kept whole.

A chunk is what search finds, an answer quotes and a citation preview shows, so it should read as a
passage: it starts at a heading (which it keeps as its title, not in its text), never runs across a
heading or a PDF page, and never cuts a list item or a code block unless that alone is longer than
a chunk. Pure functions without Django, run in the extraction child process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby

from knowledge.formats import Block, ExtractionError, Kind

CHUNK_MAX_CHARS = 700
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class ChunkText:
    title: str
    page: int | None
    text: str


def too_many_chunks(max_chunks: int) -> ExtractionError:
    return ExtractionError(
        f"The document would make more than {max_chunks:,} passages, the most one document may have; "
        "split it into smaller files."
    )


def chunk_blocks(blocks: Iterable[Block], *, max_chunks: int, max_chars: int = CHUNK_MAX_CHARS) -> list[ChunkText]:
    """Blocks of one section and page packed up to `max_chars`; more than `max_chunks` is refused."""
    chunks: list[ChunkText] = []
    for (_section, page), section_blocks in groupby(blocks, key=lambda block: (block.section, block.page)):
        section_blocks = list(section_blocks)
        title = section_blocks[0].title
        for text in _packed(_pieces(section_blocks, max_chars), max_chars):
            if len(chunks) == max_chunks:
                raise too_many_chunks(max_chunks)
            chunks.append(ChunkText(title=title, page=page, text=text))
    return chunks


def _pieces(blocks: list[Block], max_chars: int) -> Iterator[tuple[str, str]]:
    """(separator before it, text) of each block, or of each part of a block too long for a chunk.
    List items of one list sit one line apart; everything else a blank line."""
    previous: Kind | None = None
    for block in blocks:
        separator = "\n" if block.kind is Kind.ITEM and previous is Kind.ITEM else "\n\n"
        previous = block.kind
        if len(block.text) <= max_chars:
            yield separator, block.text
            continue
        parts = _lines_cut(block.text, max_chars) if block.kind is Kind.CODE else _prose_cut(block.text, max_chars)
        for part in parts:
            yield separator, part
            # The parts of one block stay one block: code line by line, prose as one paragraph.
            separator = "\n" if block.kind is Kind.CODE else " "


def _packed(pieces: Iterable[tuple[str, str]], max_chars: int) -> Iterator[str]:
    current = ""
    for separator, piece in pieces:
        candidate = f"{current}{separator}{piece}" if current else piece
        if len(candidate) <= max_chars:
            current = candidate
        else:
            yield current
            current = piece
    if current:
        yield current


def _prose_cut(text: str, max_chars: int) -> Iterator[str]:
    """At sentence ends, a longer sentence at words, so a quote never stops mid-word."""
    for sentence in _SENTENCE_END.split(text):
        yield from _packed(((" ", word[:max_chars]) for word in sentence.split()), max_chars)


def _lines_cut(text: str, max_chars: int) -> Iterator[str]:
    """Code at line ends; a longer line in slices, since code has no sentences to cut at."""
    for line in text.split("\n"):
        if len(line) <= max_chars:
            yield line
        else:
            yield from (line[start : start + max_chars] for start in range(0, len(line), max_chars))
