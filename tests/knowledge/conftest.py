"""Knowledge-base fixtures: ingest runs inline, and helpers build collections, documents and chats."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from knowledge import services
from knowledge.models import Collection, KbChat

HANDBOOK = {
    "quotas.md": (
        "# Quotas\n\n"
        "Every person has a sandbox quota for cpu, memory and disk. When a limit is hit the request is refused "
        "with status 507 and nothing is evicted.\n\n"
        "To free capacity open the my-resources screen and close a sandbox you no longer need."
    ),
    "sharing.md": (
        "# Sharing chats\n\n"
        "The owner of a knowledge-base chat can share it read-only with colleagues. Readers get a share "
        "notification and can read the whole chat, but they cannot send messages."
    ),
}


@pytest.fixture
def make_collection(db: None) -> Callable[..., Collection]:
    def build(
        name: str = "Handbook", *, user_id: str = "alice", description: str = "", writers: Sequence[str] = ()
    ) -> Collection:
        collection = services.collection_create(user_id=user_id, name=name, description=description)
        if writers:
            services.collection_writers_add(collection_id=collection.id, user_id=user_id, user_ids=list(writers))
        return collection

    return build


@pytest.fixture
def upload(
    django_capture_on_commit_callbacks: Any,
    api_client_for: Callable[[str], APIClient],
    run_tasks: Callable[[], list[Any]],
) -> Callable[..., Any]:
    """Uploads over HTTP as `user_id`, then runs the queued tasks (the ingest) as the worker would."""

    def send(
        collection_id: str,
        filename: str,
        content: bytes | str,
        *,
        content_type: str = "text/plain",
        user_id: str = "alice",
    ) -> Any:
        data = content.encode() if isinstance(content, str) else content
        file = SimpleUploadedFile(filename, data, content_type=content_type)
        with django_capture_on_commit_callbacks(execute=True):
            response = api_client_for(user_id).post(
                f"/kb/collections/{collection_id}/documents", {"file": file}, format="multipart"
            )
        run_tasks()
        return response

    return send


@pytest.fixture
def handbook(make_collection: Callable[..., Collection], upload: Callable[..., Any]) -> Collection:
    """A collection with two small ready documents."""
    collection = make_collection("Operations handbook")
    for filename, text in HANDBOOK.items():
        assert upload(collection.id, filename, text, content_type="text/markdown").status_code == 202
    return collection


@pytest.fixture
def make_chat(db: None) -> Callable[..., KbChat]:
    def build(collection: Collection, *, owner: str = "alice", title: str = "Questions") -> KbChat:
        return services.chat_create(user_id=owner, title=title, collection_ids=[collection.id])

    return build


@pytest.fixture
def ask(django_capture_on_commit_callbacks: Any, api_client_for: Callable[[str], APIClient]) -> Callable[..., Any]:
    def send(chat_id: str, question: str, *, user_id: str = "alice") -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return api_client_for(user_id).post(f"/kb/chats/{chat_id}/messages", {"content": question}, format="json")

    return send
