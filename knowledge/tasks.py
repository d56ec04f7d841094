"""The knowledge base's background tasks, run by `manage.py worker`."""

from __future__ import annotations

from django_tasks import task

from collab.background import when_given_up
from knowledge.ingest import document_ingest_failed, ingest_document


@task()
def ingest_document_task(document_id: str, content_version: int, user_id: str) -> None:
    ingest_document(document_id=document_id, content_version=content_version, user_id=user_id)


def _ingest_given_up(*, reason: str, document_id: str, content_version: int, user_id: str) -> None:
    document_ingest_failed(document_id=document_id, content_version=content_version, reason=reason)


when_given_up(ingest_document_task, _ingest_given_up)
