"""Demo data: an operations handbook collection and a shared chat, so a new user gets a cited answer at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from collab.actor import Actor
from knowledge import services
from knowledge.ingest import document_embed, ingest_document
from knowledge.models import Collection, Document, KbChat

DOCS_DIR = Path(__file__).resolve().parent / "demo_docs"
COLLECTION_NAME = "Operations handbook"
OWNER = "alice"
# The demo's own person: what a command does, it does as them (docs/ARCHITECTURE.md §3).
AS_OWNER = Actor(OWNER)
CHAT_TITLE = "Freeing quota"
CHAT_QUESTION = "How do I free capacity when I hit my sandbox quota?"
CHAT_READERS = ["bob"]


def load(*, say: Callable[[str], None]) -> None:
    """Idempotent: the collection, its documents and the chat are created once; a handbook file
    whose text changed since is uploaded again (same document id, fresh chunks)."""
    collection = _collection(say)
    for path in sorted(DOCS_DIR.glob("*.md")):
        _document(collection, path, say)
    _chat(collection, say)


def _collection(say: Callable[[str], None]) -> Collection:
    collection = Collection.objects.filter(name=COLLECTION_NAME).first()
    if collection is None:
        collection = services.collection_create(
            actor=AS_OWNER,
            name=COLLECTION_NAME,
            description="How the workspace runs: quotas, sandboxes, sharing and notifications.",
        )
        say(f"created collection {COLLECTION_NAME!r}")
    return collection


def _document(collection: Collection, path: Path, say: Callable[[str], None]) -> None:
    data = path.read_bytes()
    existing = Document.objects.filter(collection=collection, filename=path.name).first()
    if existing is not None and bytes(existing.content) == data and existing.status == Document.Status.READY:
        return
    document = services.document_upload(
        collection_id=collection.id, actor=AS_OWNER, filename=path.name, content_type="text/markdown", data=data
    )
    # Ingest right here so the answers work before the worker starts; its queued task then finds
    # the document ready and does nothing.
    ingest_document(document_id=document.id, content_version=document.content_version, user_id=OWNER)
    document_embed(document_id=document.id)
    say(f"ingested {path.name}")


def _chat(collection: Collection, say: Callable[[str], None]) -> None:
    if KbChat.objects.filter(created_by=OWNER, title=CHAT_TITLE).exists():
        return
    chat = services.chat_create(actor=AS_OWNER, title=CHAT_TITLE, collection_ids=[collection.id])
    services.chat_message_send(chat_id=chat.id, actor=AS_OWNER, content=CHAT_QUESTION)
    services.chat_share(chat_id=chat.id, actor=AS_OWNER, user_ids=CHAT_READERS)
    say(f"created chat {CHAT_TITLE!r} of {OWNER}, shared read-only with {', '.join(CHAT_READERS)}")
