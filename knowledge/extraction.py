"""Reading an upload in a child process, so that no document can take the worker's memory or time.

A 62.6 KB PDF once expanded to 40 MB of text and 60,264 chunks inside the worker. Now the worker
starts `python -m knowledge.extraction` for each document: the child limits its own address space,
CPU time and file writes before it reads a byte, extracts and chunks the document (refusing more
text or more chunks than allowed), and prints the chunks as JSON. The worker waits at most a
timeout, then kills it. Every limit that stops a document becomes its `failed` reason.

No Django here: the child imports this module and `knowledge.formats` / `knowledge.chunking` only.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from knowledge.chunking import ChunkText, chunk_blocks
from knowledge.formats import ExtractionError, TooMuchText, extract_blocks

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The child's exit status when an allocation failed under its address-space limit.
EXIT_OUT_OF_MEMORY = 86
_MEBIBYTE = 1024 * 1024


@dataclass(frozen=True)
class ExtractionLimits:
    max_chars: int
    max_chunks: int
    memory_bytes: int
    cpu_seconds: int
    timeout_seconds: float
    # Set when `max_chars` is the upload's size times this expansion (smaller than the cap on every
    # document): the refusal then says so.
    upload_bytes: int = 0
    expansion: int = 0

    def too_much_text_reason(self, refused: TooMuchText) -> str:
        if not self.expansion:
            return str(refused)
        return (
            f"The document's {self.upload_bytes:,}-byte upload expands to more than {self.max_chars:,} characters "
            f"of text, more than {self.expansion} characters per byte uploaded (the most a file may expand: a "
            "small file that unpacks to far more text is refused). Upload its text, or split it into smaller files."
        )


def extract_chunks(data: bytes, fmt: str, *, limits: ExtractionLimits) -> list[ChunkText]:
    """The document's chunks, read by a child process; ExtractionError says which limit stopped it.

    OSError (no process could be started) propagates: that is the machine, not the document, and
    the ingest task tries again later."""
    command = [sys.executable, "-E", "-s", "-m", "knowledge.extraction", fmt, json.dumps(asdict(limits))]
    # An empty environment: the child needs no secrets, settings or database to read a file.
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=PROJECT_ROOT,
        env={},
    )
    try:
        out, err = child.communicate(data, timeout=limits.timeout_seconds)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise ExtractionError(
            f"Reading the document took longer than {limits.timeout_seconds:g} seconds, the most one document may take."
        ) from None
    return _outcome(child.returncode, out, err, limits)


def _outcome(returncode: int, out: bytes, err: bytes, limits: ExtractionLimits) -> list[ChunkText]:
    if returncode == EXIT_OUT_OF_MEMORY:
        raise ExtractionError(
            f"Reading the document needed more than {limits.memory_bytes / _MEBIBYTE:g} MiB of memory, the most "
            "one document may use."
        )
    if returncode == -signal.SIGXCPU:
        raise ExtractionError(
            f"Reading the document needed more than {limits.cpu_seconds} seconds of processor time, the most one "
            "document may use."
        )
    if returncode == -signal.SIGKILL:
        raise ExtractionError("Reading the document was stopped by the system: it needed more than its share.")
    try:
        if returncode != 0:
            raise ValueError(f"exit status {returncode}")
        result = json.loads(out)
        if "failed" in result:
            raise ExtractionError(str(result["failed"]))
        return [ChunkText(title=str(title), page=page, text=str(text)) for title, page, text in result["chunks"]]
    except (ValueError, KeyError, TypeError) as exc:
        logger.error("document extraction stopped unexpectedly (%s): %s", exc, err[-2000:].decode(errors="replace"))
        raise ExtractionError("The document could not be read: its reader stopped unexpectedly.") from None


def _limit_self(limits: ExtractionLimits) -> None:
    """Kernel limits on this process: allocations past the memory limit fail (MemoryError), CPU past
    its limit ends it (SIGXCPU; no core file), and it may write no file."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _child(fmt: str, limits: ExtractionLimits) -> int:
    _limit_self(limits)
    # pypdf warns about every oddity of a broken PDF; a hostile one could fill the worker's log.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    try:
        data = sys.stdin.buffer.read()
        try:
            blocks = extract_blocks(data, fmt, max_chars=limits.max_chars)
            chunks = chunk_blocks(blocks, max_chunks=limits.max_chunks)
            result: dict[str, object] = {"chunks": [[chunk.title, chunk.page, chunk.text] for chunk in chunks]}
        except TooMuchText as refused:
            result = {"failed": limits.too_much_text_reason(refused)}
        except ExtractionError as exc:
            result = {"failed": str(exc)}
        sys.stdout.buffer.write(json.dumps(result).encode())
        sys.stdout.buffer.flush()
    except MemoryError:
        os._exit(EXIT_OUT_OF_MEMORY)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], ExtractionLimits(**json.loads(sys.argv[2]))))
