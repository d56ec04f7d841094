"""What an uploaded file is, and its text as blocks: paragraphs, list items and code under their headings.

Pure functions without Django: they run in the extraction child process (knowledge/extraction.py),
which reads one upload under memory and CPU limits. Every pattern here runs on user text, so each
one is linear (tests/knowledge/test_hostile_text.py times them on 10^5-character inputs).
"""

from __future__ import annotations

import enum
import io
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode

_BY_EXTENSION = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown", ".pdf": "pdf"}
_BY_CONTENT_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "application/pdf": "pdf",
}
SUPPORTED_DESCRIPTION = "plain text (.txt), Markdown (.md) or PDF (.pdf)"

# A title is the trail of headings above a passage, joined by TITLE_SEPARATOR; the longest one kept.
TITLE_MAX_CHARS = 300
TITLE_SEPARATOR = " › "
# A line of plain text this short, alone between blank lines and not ending a sentence, is a heading.
TEXT_HEADING_MAX_CHARS = 80
# Headings in a row nest at most this deep, as in Markdown; deeper, the outermost drops out of the title.
TEXT_HEADING_DEPTH = 6
_NOT_A_HEADING_END = tuple(".,;:!")
_BULLETS = ("- ", "* ", "+ ", "• ")
_ORDERED_ITEM = re.compile(r"\d{1,9}[.)]\s")


class ExtractionError(Exception):
    """The file was accepted but its text cannot be read; the reason is shown to the uploader."""


class Kind(enum.Enum):
    PARAGRAPH = "paragraph"  # prose: may be cut at sentence ends, then words, when longer than a chunk
    ITEM = "item"  # one list item with its sub-items: prose, one line apart from the items next to it
    CODE = "code"  # code or a table: kept verbatim, cut only at line ends


@dataclass(frozen=True)
class Block:
    """A unit of text that chunking keeps whole unless it alone is longer than a chunk.

    `section` changes at every heading (two sections may share a title) and `page` with every
    PDF page: a chunk never spans either."""

    text: str
    kind: Kind = Kind.PARAGRAPH
    title: str = ""
    section: int = 0
    page: int | None = None


def document_format(filename: str, content_type: str) -> str | None:
    """The extension decides; the declared content type only helps a name without one."""
    extension = PurePosixPath(filename).suffix.lower()
    if extension:
        return _BY_EXTENSION.get(extension)
    return _BY_CONTENT_TYPE.get(content_type.split(";", 1)[0].strip().lower())


class TooMuchText(ExtractionError):
    """More text than `max_chars`: the extraction's limits say why that many (knowledge/extraction.py)."""

    def __init__(self, max_chars: int) -> None:
        super().__init__(
            f"The document holds more than {max_chars:,} characters of text, the most one document may hold; "
            "split it into smaller files."
        )
        self.max_chars = max_chars


def too_much_text(max_chars: int) -> TooMuchText:
    return TooMuchText(max_chars)


def extract_blocks(data: bytes, fmt: str, *, max_chars: int) -> list[Block]:
    """The document's blocks in reading order; more than `max_chars` of text is refused."""
    if fmt == "pdf":
        blocks = _pdf_blocks(data, max_chars)
    else:
        text = _decoded(data)
        # Markup only shrinks, so the source's length bounds the text before any parsing is paid.
        if len(text) > max_chars:
            raise too_much_text(max_chars)
        blocks = markdown_blocks(text) if fmt == "markdown" else text_blocks(text)
    if not any(block.text.strip() for block in blocks):
        raise ExtractionError("The document contains no readable text.")
    return blocks


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"The file is not UTF-8 text (undecodable byte at offset {exc.start}).") from exc


def _flat(text: str) -> str:
    return " ".join(text.split())


def _title(trail: Sequence[str]) -> str:
    title = TITLE_SEPARATOR.join(part for part in trail if part)
    return title if len(title) <= TITLE_MAX_CHARS else title[: TITLE_MAX_CHARS - 1].rstrip() + "…"


# --- Markdown: markdown-it-py's parse tree, not patterns ---------------------------------------------

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


class _MarkdownWalk:
    """Blocks from the parse tree. markdown-it caps nesting (maxNesting), so recursion stays shallow."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.headings: list[tuple[int, str]] = []
        self.title = ""
        self.section = 0

    def add(self, text: str, kind: Kind) -> None:
        if text.strip():
            self.blocks.append(Block(text=text, kind=kind, title=self.title, section=self.section))

    def visit(self, node: SyntaxTreeNode) -> None:
        kind = node.type
        if kind == "heading":
            level = int(node.tag[1:])
            while self.headings and self.headings[-1][0] >= level:
                self.headings.pop()
            self.headings.append((level, _flat(_inline_text(node))[:TITLE_MAX_CHARS]))
            self.title = _title([heading for _, heading in self.headings])
            self.section += 1
        elif kind == "paragraph":
            self.add(_paragraph_text(node), Kind.PARAGRAPH)
        elif kind in ("bullet_list", "ordered_list"):
            for item in _list_items(node, indent=""):
                self.add(item, Kind.ITEM)
        elif kind in ("fence", "code_block"):
            self.add(node.content.rstrip("\n"), Kind.CODE)
        elif kind == "table":
            self.add("\n".join(_table_rows(node)), Kind.CODE)
        elif kind == "blockquote":
            for child in node.children:
                self.visit(child)


def markdown_blocks(text: str) -> list[Block]:
    walk = _MarkdownWalk()
    for node in SyntaxTreeNode(_MARKDOWN.parse(text)).children:
        walk.visit(node)
    return walk.blocks


def _inline_tokens(node: SyntaxTreeNode) -> list[Token]:
    inline = next((child for child in node.children if child.type == "inline"), None)
    if inline is None or inline.token is None:
        return []
    return inline.token.children or []


def _inline_text(node: SyntaxTreeNode) -> str:
    """The words of a paragraph or heading: link text without its URL, an image's alt text, no
    emphasis marks. A stack rather than recursion: image alt text nests as deep as the input."""
    parts: list[str] = []
    pending: list[Token] = list(reversed(_inline_tokens(node)))
    while pending:
        token = pending.pop()
        if token.type in ("text", "code_inline"):
            parts.append(token.content)
        elif token.type == "softbreak":
            parts.append(" ")
        elif token.type == "hardbreak":
            parts.append("\n")
        elif token.children:
            pending.extend(reversed(token.children))
    return "".join(parts)


def _paragraph_text(node: SyntaxTreeNode) -> str:
    return "\n".join(_flat(line) for line in _inline_text(node).split("\n") if line.strip())


def _list_items(node: SyntaxTreeNode, *, indent: str) -> Iterator[str]:
    """Each item as lines: its marker and text, then its own sub-items indented below it."""
    ordered = node.type == "ordered_list"
    number = int(node.attrs.get("start", 1)) if ordered else 0
    for item in node.children:
        marker = f"{number}. " if ordered else "- "
        number += 1
        lines = [line for child in item.children for line in _item_lines(child, indent)]
        if lines:
            first, rest = lines[0], lines[1:]
            yield "\n".join([f"{indent}{marker}{first.lstrip()}", *(_indented(line, indent) for line in rest)])


def _item_lines(node: SyntaxTreeNode, indent: str) -> list[str]:
    if node.type in ("bullet_list", "ordered_list"):
        return list(_list_items(node, indent=indent + "  "))
    if node.type in ("fence", "code_block"):
        return node.content.rstrip("\n").split("\n")
    if node.type == "table":
        return list(_table_rows(node))
    if node.type == "blockquote":
        return [line for child in node.children for line in _item_lines(child, indent)]
    if node.type in ("paragraph", "heading"):
        return _paragraph_text(node).split("\n")
    return []


def _indented(line: str, indent: str) -> str:
    # Sub-items come indented already; anything else of the item lines up under its text.
    return line if line.startswith(indent + "  ") else f"{indent}  {line}"


def _table_rows(node: SyntaxTreeNode) -> Iterator[str]:
    for section in node.children:
        for row in section.children:
            yield " | ".join(_flat(_inline_text(cell)) for cell in row.children)


# --- Plain text: blank lines, and lines that look like headings, items or code -----------------------


def text_blocks(text: str, *, page: int | None = None, find_headings: bool = True) -> list[Block]:
    """Paragraphs between blank lines. A short line alone before more text is a heading (a heading
    right after another is its sub-heading; after text, it replaces the last one); bullet and
    numbered lines are list items; paragraphs indented throughout are code."""
    paragraphs = _paragraphs(text)
    blocks: list[Block] = []
    trail: list[str] = []
    section = 0
    after_heading = False
    for index, lines in enumerate(paragraphs):
        heading = _heading(lines) if find_headings and index + 1 < len(paragraphs) else None
        if heading is not None:
            trail = ([*trail, heading] if after_heading else [*trail[:-1], heading])[-TEXT_HEADING_DEPTH:]
            section += 1
            after_heading = True
            continue
        after_heading = False
        title = _title(trail)
        for piece, kind in _paragraph_pieces(lines):
            blocks.append(Block(text=piece, kind=kind, title=title, section=section, page=page))
    return blocks


def _paragraphs(text: str) -> list[list[str]]:
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [lines for lines in paragraphs if lines]


def _heading(lines: list[str]) -> str | None:
    if len(lines) == 2 and lines[1].strip() and set(lines[1].strip()) <= {"=", "-"}:
        return _flat(lines[0])[:TEXT_HEADING_MAX_CHARS]  # an underlined (setext) heading
    if len(lines) != 1 or _is_code(lines) or _is_item(lines[0]):
        return None
    line = _flat(lines[0])
    if len(line) > TEXT_HEADING_MAX_CHARS or line.endswith(_NOT_A_HEADING_END):
        return None
    return line if any(character.isalpha() for character in line) else None


def _is_code(lines: list[str]) -> bool:
    return all(line.startswith(("    ", "\t")) for line in lines)


def _is_item(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith(_BULLETS) or _ORDERED_ITEM.match(stripped) is not None


def _paragraph_pieces(lines: list[str]) -> Iterator[tuple[str, Kind]]:
    """Code verbatim; otherwise a prose run, then one item per bullet or number, each taking the
    lines after it until the next (wrapped items, indented or not, as Markdown reads them)."""
    if _is_code(lines):
        yield "\n".join(line[4:] if line.startswith("    ") else line[1:] for line in lines), Kind.CODE
        return
    run: list[str] = []
    run_kind = Kind.PARAGRAPH
    for line in lines:
        starts_item = _is_item(line)
        if run and starts_item:
            yield _flat(" ".join(run)), run_kind
            run = []
        if not run:
            run_kind = Kind.ITEM if starts_item else Kind.PARAGRAPH
        run.append(line)
    if run:
        yield _flat(" ".join(run)), run_kind


# --- PDF: one page at a time, stopping once the text passes its limit -------------------------------

# A line set this much larger than the document's body text is a heading; its lines are the
# layout's, so size is what says so (a short line alone says nothing in a PDF).
PDF_HEADING_SCALE = 1.15


@dataclass(frozen=True)
class _PdfLine:
    text: str
    size: float  # the largest effective font size on the line, in points


def _pdf_blocks(data: bytes, max_chars: int) -> list[Block]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    pages: list[list[_PdfLine]] = []
    total = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted; upload an unprotected copy.")
        for page in reader.pages:
            lines = _pdf_lines(page)
            total += sum(len(line.text) + 1 for line in lines)
            if total > max_chars:
                raise too_much_text(max_chars)
            pages.append(lines)
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    return _pdf_sections(pages)


def _pdf_lines(page: object) -> list[_PdfLine]:
    """The page's text lines as pypdf extracts them, each with the size it is set in."""

    lines: list[_PdfLine] = []
    text, size = "", 0.0

    def visit(piece: str, cm: Sequence[float], tm: Sequence[float], font: object, font_size: float) -> None:
        nonlocal text, size
        # What the reader sees: the font's size scaled by the text and the page matrices.
        shown = font_size * math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        *ended, rest = piece.split("\n")
        for part in ended:
            text += part
            if text.strip():
                size = max(size, shown)
            lines.append(_PdfLine(text, size))
            text, size = "", 0.0
        text += rest
        if rest.strip():
            size = max(size, shown)

    page.extract_text(visitor_text=visit)  # type: ignore[attr-defined]
    if text.strip():
        lines.append(_PdfLine(text, size))
    return lines


def _body_size(pages: list[list[_PdfLine]]) -> float:
    """The size most of the document's characters are set in."""
    characters: dict[float, int] = {}
    for line in (line for lines in pages for line in lines):
        rounded = round(line.size, 1)
        characters[rounded] = characters.get(rounded, 0) + len(line.text.strip())
    return max(characters, key=lambda size: characters[size]) if characters else 0.0


def _is_pdf_heading(line: _PdfLine, body: float) -> bool:
    text = _flat(line.text)
    return (
        body > 0
        and line.size >= body * PDF_HEADING_SCALE
        and 0 < len(text) <= TEXT_HEADING_MAX_CHARS
        and not text.endswith(_NOT_A_HEADING_END)
        and any(character.isalpha() for character in text)
    )


def _pdf_run_blocks(run: list[str], *, page: int, trail: list[tuple[float, str]], section: int) -> list[Block]:
    title = _title([heading for _, heading in trail])
    return [
        Block(text=block.text, kind=block.kind, title=title, section=section, page=page)
        for block in text_blocks("\n".join(run), page=page, find_headings=False)
    ]


def _pdf_sections(pages: list[list[_PdfLine]]) -> list[Block]:
    """Blocks page by page; a heading line starts a section that runs on across pages until the
    next, and titles what follows it (a larger heading above a smaller one, as sizes nest)."""
    body = _body_size(pages)
    blocks: list[Block] = []
    trail: list[tuple[float, str]] = []
    section = 0
    for number, lines in enumerate(pages, start=1):
        run: list[str] = []
        for line in lines:
            if not _is_pdf_heading(line, body):
                run.append(line.text)
                continue
            blocks.extend(_pdf_run_blocks(run, page=number, trail=trail, section=section))
            run = []
            trail = [*(entry for entry in trail if entry[0] > line.size), (line.size, _flat(line.text))]
            trail = trail[-TEXT_HEADING_DEPTH:]
            section += 1
        blocks.extend(_pdf_run_blocks(run, page=number, trail=trail, section=section))
    return blocks
