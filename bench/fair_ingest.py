"""Fair background work (issue 44): how long carol's one-passage upload waits while bob's large one
ingests, with the packaged embedding model on, the worker running the queue in order as
`manage.py worker` does.

Run: .venv/bin/python bench/fair_ingest.py [--database-url postgres://...] [--characters 1000000]

bob uploads a Markdown file of `--characters` characters (about 1,400 passages at a million), and
carol a one-passage note right after; then the worker drains the queue. Prints, in seconds from
the worker's start: when carol's document was ready (searchable by words) and embedded, and when
bob's was. Copy this file into an older checkout to measure it "before". Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import setup_django  # noqa: E402


def _large_markdown(characters: int) -> str:
    sections, number = [], 0
    while sum(map(len, sections)) < characters:
        sections.append(
            f"# Section {number}\n\nStep {number} of the runbook: check replica {number}, drain its "
            f"connections, restart the pool and watch the error rate for five minutes before step {number + 1}. " * 4
        )
        number += 1
    return "\n\n".join(sections)[:characters]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--characters", type=int, default=1_000_000)
    args = parser.parse_args()
    from knowledge.embeddings.local import packaged_model_path

    os.environ["WORKSPACE_EMBEDDINGS_PATH"] = packaged_model_path()
    vendor = setup_django(args.database_url, "fair_ingest")

    from collab.actor import Actor
    from knowledge import services
    from knowledge.embeddings import get_embedder
    from knowledge.ingest import unembedded_chunks
    from knowledge.models import Chunk, Document
    from workspace.worker import WorkerIdentity, run_next

    def upload(user_id: str, filename: str, text: str) -> str:
        collection = services.collection_create(actor=Actor(user_id), name=f"{user_id}'s notes")
        document = services.document_upload(
            collection_id=collection.id,
            actor=Actor(user_id),
            filename=filename,
            content_type="text/markdown",
            data=text.encode(),
        )
        return document.id

    large = upload("bob", "runbook.md", _large_markdown(args.characters))
    small = upload("carol", "note.md", "# Note\n\nThe office closes at six.")
    model = get_embedder().model
    worker = WorkerIdentity(worker_id="bench")
    started = time.monotonic()
    moments: dict[str, float] = {}

    def note(name: str, document_id: str) -> None:
        ready = Document.objects.filter(pk=document_id, status=Document.Status.READY).exists()
        if ready:
            moments.setdefault(f"{name}_ready", time.monotonic() - started)
        if ready and not unembedded_chunks(model).filter(document_id=document_id).exists():
            moments.setdefault(f"{name}_embedded", time.monotonic() - started)

    tasks = 0
    while run_next(worker) is not None:
        tasks += 1
        note("carol", small)
        note("bob", large)
    print(
        json.dumps(
            {
                "database": vendor,
                "bob_characters": args.characters,
                "bob_passages": Chunk.objects.filter(document_id=large).count(),
                "tasks_run": tasks,
                **{name: round(seconds, 2) for name, seconds in sorted(moments.items())},
            }
        )
    )


if __name__ == "__main__":
    main()
