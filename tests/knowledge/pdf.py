"""Builds small, valid PDFs with real text (one page or several, or a decompression bomb), so PDF
ingest is tested without fixtures on disk."""

from __future__ import annotations

import zlib

BOMB_LINE = b"(Backups are kept for one year.) Tj 0 -14 Td\n"


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _text_stream(lines: list[str]) -> bytes:
    shown = " ".join(f"({_escaped(line)}) Tj 0 -16 Td" for line in lines)
    return f"BT /F1 12 Tf 72 720 Td {shown} ET".encode("latin-1")


def _stream_object(content: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)


def _pdf(streams: list[bytes], page_streams: list[int]) -> bytes:
    """Objects: 1 catalog, 2 page tree, 3 font, then the content streams, then one page per entry of
    `page_streams` (the index of the stream it shows; pages may share one)."""
    first_stream = 4
    first_page = first_stream + len(streams)
    kids = " ".join(f"{first_page + n} 0 R" for n in range(len(page_streams)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(page_streams)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        *streams,
        *(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {first_stream + index} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
            for index in page_streams
        ),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n".encode()
    return bytes(out)


def pdf_with_pages(pages: list[list[str]]) -> bytes:
    """One page per entry, each showing its lines."""
    streams = [_stream_object(_text_stream(lines)) for lines in pages]
    return _pdf(streams, list(range(len(pages))))


def pdf_with_text(lines: list[str]) -> bytes:
    return pdf_with_pages([lines])


def pdf_bomb(*, stream_bytes: int, pages: int) -> bytes:
    """A decompression bomb: one Flate-compressed content stream of `stream_bytes` of repeated text
    operators (a few hundred times smaller compressed), shown on each of `pages` pages. Compressed
    piece by piece, so building it never holds the expanded text in the test's own memory."""
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(b"BT /F1 12 Tf 72 720 Td\n")]
    block = BOMB_LINE * 1000
    for _ in range(stream_bytes // len(block)):
        parts.append(compressor.compress(block))
    parts.append(compressor.compress(b"ET") + compressor.flush())
    compressed = b"".join(parts)
    stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(compressed), compressed)
    return _pdf([stream], [0] * pages)


def _sized_stream(lines: list[tuple[str, int]]) -> bytes:
    shown = " ".join(f"/F1 {size} Tf ({_escaped(text)}) Tj 0 -{size + 4} Td" for text, size in lines)
    return f"BT 72 720 Td {shown} ET".encode("latin-1")


def pdf_with_sized_lines(pages: list[list[tuple[str, int]]]) -> bytes:
    """One page per entry, each line set in its own font size (points): headings as a layout sets them."""
    streams = [_stream_object(_sized_stream(lines)) for lines in pages]
    return _pdf(streams, list(range(len(pages))))
