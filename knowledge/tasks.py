"""The knowledge base's background tasks, run by `manage.py worker`."""

from __future__ import annotations

from django_tasks import task

from collab.background import enqueue, when_given_up
from knowledge.embeddings import get_embedder
from knowledge.ingest import document_embed_turn, document_ingest_failed, ingest_document

# Uploads and their embeddings run on a queue of their own, a worker thread of its own, people
# taking turns on it (workspace/worker.py `_in_turns`): the `user_id` of each task says whose it is.
KNOWLEDGE_QUEUE = "knowledge"


@task(queue_name=KNOWLEDGE_QUEUE)
def ingest_document_task(document_id: str, content_version: int, user_id: str) -> None:
    ingest_document(document_id=document_id, content_version=content_version, user_id=user_id)
    if get_embedder() is not None:
        enqueue(embed_document_task, document_id=document_id, user_id=user_id)


@task(queue_name=KNOWLEDGE_QUEUE)
def embed_document_task(document_id: str, user_id: str = "") -> None:
    """One turn of the document's embeddings; the next goes behind the work that came meanwhile
    (another person's upload waits for one turn, not for the whole file)."""
    if document_embed_turn(document_id=document_id):
        enqueue(embed_document_task, document_id=document_id, user_id=user_id)


def _ingest_given_up(*, reason: str, document_id: str, content_version: int, user_id: str) -> None:
    document_ingest_failed(document_id=document_id, content_version=content_version, reason=reason)


when_given_up(ingest_document_task, _ingest_given_up)
