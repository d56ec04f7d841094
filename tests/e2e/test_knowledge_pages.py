"""In a real browser: upload then see chunks, ask and follow a cited marker, share, read-only view."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from knowledge import services
from knowledge.ingest import ingest_document
from knowledge.models import Collection, KbChat

pytestmark = pytest.mark.django_db(transaction=True)

QUOTAS = (
    "# Quotas\n\nWhen a quota limit is hit the request is refused with status 507 and nothing is evicted.\n\n"
    "To free capacity open the my-resources screen and close a sandbox you no longer need."
)


@pytest.fixture(autouse=True)
def tasks_run_inline(settings: Any) -> None:
    """The live server shares this process: with the immediate backend a task runs in the request
    that enqueued it, once its transaction commits, so the page that follows an upload already
    shows the chunks (no worker to wait for)."""
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}
    }


@pytest.fixture
def handbook() -> Collection:
    collection = services.collection_create(actor=Actor("alice"), name="Operations handbook")
    document = services.document_upload(
        collection_id=collection.id,
        actor=Actor("alice"),
        filename="quotas.md",
        content_type="text/markdown",
        data=QUOTAS.encode(),
    )
    ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    return collection


@pytest.fixture
def chat(handbook: Collection) -> KbChat:
    return services.chat_create(actor=Actor("alice"), title="Quota questions", collection_ids=[handbook.id])


def test_upload_a_document_then_see_its_chunks(page_as) -> None:
    # Given alice on the collections page
    tab = page_as("alice")
    tab.goto("/kb/collections")
    # When she creates a collection and uploads a markdown file into it
    tab.fill("#collection-name", "Runbooks")
    tab.get_by_test_id("create-collection").click()

    tab.get_by_test_id("upload-file").set_input_files(
        files=[{"name": "sandboxes.md", "mimeType": "text/markdown", "buffer": b"# Sandboxes\n\nClose idle sandboxes."}]
    )
    tab.get_by_test_id("upload").click()

    # Then its row turns ready with one chunk, and its page shows that chunk under its heading, cited zero times
    row = tab.get_by_test_id("document-row").filter(has_text="sandboxes.md")
    expect(row.get_by_test_id("document-status")).to_have_text("ready")
    expect(row.get_by_test_id("document-chunks")).to_have_text("1")
    row.get_by_test_id("document-link").click()
    expect(tab.get_by_test_id("chunk")).to_have_count(1)
    expect(tab.get_by_test_id("chunk-title")).to_have_text("Sandboxes")
    expect(tab.get_by_test_id("chunk-text")).to_have_text("Close idle sandboxes.")
    expect(tab.get_by_test_id("chunk-cited")).to_have_text("cited 0")


def test_ask_and_open_the_chunk_a_marker_cites(page_as, chat: KbChat) -> None:
    # Given alice's chat over the handbook, which holds quotas.md
    tab = page_as("alice")
    tab.goto(f"/kb/chats/{chat.id}")

    # When she asks how to free capacity when a quota is hit
    tab.get_by_test_id("question").fill("How do I free capacity when a quota is hit?")
    tab.get_by_test_id("ask").click()

    # Then the answer carries marker [1], and clicking it shows the cited chunk, cited once
    answer = tab.get_by_test_id("message-assistant")
    expect(answer).to_contain_text("[1]")
    citation = answer.get_by_test_id("citation").first
    expect(citation.get_by_test_id("cited-chunk")).not_to_be_visible()
    answer.get_by_test_id("marker").first.click()
    expect(citation.get_by_test_id("cited-chunk")).to_be_visible()
    expect(citation.get_by_test_id("cited-chunk")).to_contain_text("my-resources screen")
    expect(citation).to_contain_text("cited 1")


def test_share_a_chat_and_the_reader_sees_it_listed(page_as, chat: KbChat) -> None:
    # Given alice's chat
    owner = page_as("alice")
    # When she shares it with bob from the chat page
    owner.goto(f"/kb/chats/{chat.id}")
    owner.get_by_test_id("open-share").click()
    owner.get_by_test_id("share-bob").check()
    owner.get_by_test_id("share-submit").click()
    # Then the page confirms it
    expect(owner.locator(".flash")).to_contain_text("Shared read-only with bob")

    # Then bob finds the chat in his list and his bell counts one
    reader = page_as("bob")
    reader.goto("/kb/chats")

    expect(reader.get_by_test_id("chat-row").filter(has_text="Quota questions")).to_have_count(1)
    expect(reader.get_by_test_id("bell-count")).to_have_text("1")


def test_shared_reader_gets_a_read_only_view_without_a_send_box(page_as, chat: KbChat) -> None:
    # Given alice's chat with one answered question, shared with bob
    services.chat_message_send(chat_id=chat.id, actor=Actor("alice"), content="How do I free capacity?")
    services.chat_share(chat_id=chat.id, actor=Actor("alice"), user_ids=["bob"])
    reader = page_as("bob")

    # When bob opens it
    reader.goto(f"/kb/chats/{chat.id}")

    # Then he reads the answer in a read-only view with neither a send box nor a share button
    expect(reader.get_by_test_id("read-only")).to_be_visible()
    expect(reader.get_by_test_id("message-assistant")).to_contain_text("[1]")
    expect(reader.get_by_test_id("ask-form")).to_have_count(0)
    expect(reader.get_by_test_id("open-share")).to_have_count(0)
