"""What an uploaded file is, the text inside it, and how that text is cut into chunks."""

from __future__ import annotations

import io
import re
from pathlib import PurePosixPath

CHUNK_MAX_CHARS = 700

_BY_EXTENSION = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown", ".pdf": "pdf"}
_BY_CONTENT_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "application/pdf": "pdf",
}
SUPPORTED_DESCRIPTION = "plain text (.txt), Markdown (.md) or PDF (.pdf)"

_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_EMPHASIS = re.compile(r"(\*\*|__|`)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


class ExtractionError(Exception):
    """The file was accepted but its text cannot be read; the reason is shown to the uploader."""


def document_format(filename: str, content_type: str) -> str | None:
    """The extension decides; the declared content type only helps a name without one."""
    extension = PurePosixPath(filename).suffix.lower()
    if extension:
        return _BY_EXTENSION.get(extension)
    return _BY_CONTENT_TYPE.get(content_type.split(";", 1)[0].strip().lower())


def extract_text(data: bytes, fmt: str) -> str:
    if fmt == "pdf":
        text = _pdf_text(data)
    else:
        text = _decoded(data)
        if fmt == "markdown":
            text = _markdown_as_text(text)
    if not text.strip():
        raise ExtractionError("The document contains no readable text.")
    return text


def split_into_chunks(text: str, *, max_chars: int = CHUNK_MAX_CHARS) -> list[str]:
    """Paragraphs packed up to `max_chars`; a longer paragraph is cut at sentence ends, a longer
    sentence at word boundaries, so a quote never stops mid-word."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        flat = " ".join(paragraph.split())
        if not flat:
            continue
        if len(flat) <= max_chars:
            pieces.append(flat)
        else:
            for sentence in _SENTENCE_END.split(flat):
                pieces.extend(_word_wrapped(sentence, max_chars))
    return _packed(pieces, max_chars)


def _packed(pieces: list[str], max_chars: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}\n\n{piece}" if current else piece
        if len(candidate) <= max_chars:
            current = candidate
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def _word_wrapped(sentence: str, max_chars: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in sentence.split():
        word = word[:max_chars]
        candidate = f"{current} {word}" if current else word
        if len(candidate) <= max_chars:
            current = candidate
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"The file is not UTF-8 text (undecodable byte at offset {exc.start}).") from exc


def _markdown_as_text(text: str) -> str:
    text = _MD_HEADING.sub("", text)
    text = _MD_LINK.sub(r"\1", text)
    return _MD_EMPHASIS.sub("", text)


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted; upload an unprotected copy.")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    return "\n\n".join(pages)
