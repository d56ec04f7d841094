"""In a real browser, at a desktop width and at 390 px: citation previews on hover and keyboard focus,
Markdown answers, a reader copying a chat to ask there, renaming and deleting with confirmation; each
page passes axe-core, never scrolls sideways, and leaves screenshots for review."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from knowledge import services
from knowledge.ingest import ingest_document
from knowledge.models import Collection, Document, KbChat, KbChatMessage
from tests.e2e.browser import PHONE, assert_accessible, assert_no_sideways_scroll, screenshot

pytestmark = pytest.mark.django_db(transaction=True)

QUOTAS = (
    "# Quotas\n\nWhen a quota limit is hit the request is refused with status 507 and nothing is evicted.\n\n"
    "To free capacity open the my-resources screen and close a sandbox you no longer need."
)
SHARING = "# Sharing\n\nThe owner of a chat shares it read-only; readers cannot ask in it but may copy it."
MARKDOWN_ANSWER = (
    "## Freeing capacity\n\nWhen you are **blocked** by a quota [1]:\n\n"
    "1. open `My resources`\n2. close a sandbox you no longer need [2]\n\n"
    "| limit | where |\n|---|---|\n| cpu, memory | live sandboxes |\n| disk | workspaces |\n\n"
    "Beware of [this link](javascript:alert(1)) and <img src=x onerror=alert(1)>.\n\n"
    "```\nmake run && curl -s http://127.0.0.1:8000/me -H 'X-User-Id: bob' | python -m json.tool\n```"
)


@pytest.fixture(autouse=True)
def tasks_run_inline(settings: Any) -> None:
    settings.TASKS = {
        "default": {**settings.TASKS["default"], "BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}
    }


@pytest.fixture
def handbook() -> Collection:
    collection = services.collection_create(
        actor=Actor("alice"), name="Operations handbook", description="How the workspace runs."
    )
    for filename, text in (("quotas.md", QUOTAS), ("sharing.md", SHARING)):
        document = services.document_upload(
            collection_id=collection.id, actor=Actor("alice"), filename=filename, content_type="text/markdown",
            data=text.encode(),
        )  # fmt: skip
        ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    return collection


@pytest.fixture
def answered_chat(handbook: Collection) -> KbChat:
    """Alice's chat with one extractive answer citing [1] and [2], shared read-only with bob."""
    chat = services.chat_create(actor=Actor("alice"), title="Freeing quota", collection_ids=[handbook.id])
    services.chat_message_send(
        chat_id=chat.id, actor=Actor("alice"), content="How do I free capacity when a quota is hit?"
    )
    services.chat_share(chat_id=chat.id, actor=Actor("alice"), user_ids=["bob"])
    return chat


@pytest.fixture
def markdown_chat(answered_chat: KbChat) -> KbChat:
    """The answered chat, its answer replaced by Markdown as an LLM answerer would write it (hostile bits too)."""
    KbChatMessage.objects.filter(chat=answered_chat, role="assistant").update(content=MARKDOWN_ANSWER)
    return answered_chat


def _no_script_ran(tab: Any) -> list[str]:
    """Collects any alert() a hostile answer managed to run."""
    alerts: list[str] = []
    tab.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    return alerts


def test_hovering_or_focusing_a_marker_previews_its_passage(page_as, answered_chat: KbChat, viewport) -> None:
    # Given alice's answered chat
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/chats/{answered_chat.id}")
    marker = tab.get_by_test_id("marker").first
    preview = tab.get_by_test_id("citation-preview").first
    expect(preview).to_be_hidden()

    # When she hovers marker [1]
    marker.hover()

    # Then its passage shows in place, naming the document, its heading apart from the text, with the
    # page still fitting the screen
    expect(preview).to_be_visible()
    expect(preview).to_contain_text("quotas.md")
    expect(preview.get_by_test_id("preview-title")).to_have_text("Quotas")
    expect(preview).to_contain_text("my-resources screen")
    assert_no_sideways_scroll(tab)
    screenshot(tab, "kb-citation-preview-hover")

    # When she moves away, then reaches the marker with the keyboard
    tab.mouse.move(0, 0)
    expect(preview).to_be_hidden()
    marker.focus()

    # Then the preview shows for the focused marker, describes it, and Escape hides it
    expect(preview).to_be_visible()
    assert marker.get_attribute("aria-describedby") == preview.get_attribute("id")
    tab.keyboard.press("Escape")
    expect(preview).to_be_hidden()
    assert_accessible(tab)


def test_every_marker_of_a_source_shows_the_sources_one_preview_and_is_described_by_it(
    page_as, answered_chat: KbChat, viewport
) -> None:
    # Given alice's answer citing [1] three times: its passage's preview is on the page once
    KbChatMessage.objects.filter(chat=answered_chat, role="assistant").update(
        content="Refused with 507 [1]. Nothing is evicted [1].\n\nClose a sandbox on my-resources [1]."
    )
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/chats/{answered_chat.id}")
    markers = tab.get_by_test_id("message-assistant").get_by_test_id("marker")
    preview = tab.get_by_test_id("citation-preview")
    expect(markers).to_have_count(3)
    expect(preview).to_have_count(1)
    expect(preview).to_be_hidden()

    # When she hovers the third marker
    markers.nth(2).hover()

    # Then the one preview shows there, below that marker's line
    expect(tab.locator(".kb-cite").nth(2).get_by_test_id("citation-preview")).to_be_visible()
    assert preview.bounding_box()["y"] > markers.nth(2).bounding_box()["y"]

    # When she moves away and reaches the first marker with the keyboard
    tab.mouse.move(0, 0)
    expect(preview).to_be_hidden()
    markers.nth(0).focus()

    # Then the preview shows at the first marker, and every marker is described by it for screen readers
    expect(tab.locator(".kb-cite").nth(0).get_by_test_id("citation-preview")).to_be_visible()
    for index in range(3):
        expect(markers.nth(index)).to_have_accessible_description(re.compile(r"quotas\.md.*my-resources"))
    assert_accessible(tab)


def test_an_answer_renders_markdown_and_nothing_hostile_runs(page_as, markdown_chat: KbChat, viewport) -> None:
    # Given alice's chat whose answer is Markdown with a javascript: link and an onerror image
    tab = page_as("alice", viewport=viewport)
    alerts = _no_script_ran(tab)

    # When she opens it
    tab.goto(f"/kb/chats/{markdown_chat.id}")
    body = tab.get_by_test_id("message-assistant").get_by_test_id("message-body")

    # Then the heading, emphasis, list, code and table render; the link is text and the image is not loaded
    expect(body.locator("h4")).to_have_text("Freeing capacity")
    expect(body.locator("strong")).to_have_text("blocked")
    expect(body.locator("ol > li")).to_have_count(2)
    expect(body.locator("table td").first).to_have_text("cpu, memory")
    expect(body.locator("a[href^='javascript']")).to_have_count(0)
    expect(body.locator("img")).to_have_count(0)
    expect(body).to_contain_text("<img src=x onerror=alert(1)>")
    assert alerts == []
    assert_no_sideways_scroll(tab)
    assert_accessible(tab)
    screenshot(tab, "kb-chat-markdown")


def test_a_reader_copies_a_chat_and_asks_in_the_copy(page_as, answered_chat: KbChat, viewport) -> None:
    # Given alice's chat shared read-only with bob
    tab = page_as("bob", viewport=viewport)
    tab.goto(f"/kb/chats/{answered_chat.id}")
    expect(tab.get_by_test_id("ask-form")).to_have_count(0)
    assert_accessible(tab)
    assert_no_sideways_scroll(tab)
    screenshot(tab, "kb-chat-reader")

    # When bob copies it and asks in his copy
    tab.get_by_test_id("copy-chat").click()
    expect(tab.get_by_test_id("chat-title")).to_have_text("Copy of Freeing quota")
    tab.get_by_test_id("question").fill("Can a reader ask in a shared chat?")
    tab.get_by_test_id("ask").click()

    # Then his question is answered in the copy, and alice's chat is as it was
    expect(tab.get_by_test_id("message-assistant")).to_have_count(2)
    expect(tab.get_by_test_id("message-assistant").last).to_contain_text("[1]")
    # (the stored transcript has replaced the streamed one: the answer's request is over, so the
    # test's own query does not meet the live server's transaction on the shared SQLite database)
    expect(tab.locator(".kb-pending")).to_have_count(0)
    assert KbChatMessage.objects.filter(chat=answered_chat).count() == 2
    assert_no_sideways_scroll(tab)
    tab.evaluate("window.scrollTo(0, 0)")
    screenshot(tab, "kb-chat-copy")


def test_renaming_a_document_to_a_taken_name_keeps_what_was_typed(page_as, handbook: Collection, viewport) -> None:
    # Given alice on quotas.md in her handbook, which also holds sharing.md
    document = Document.objects.get(filename="quotas.md")
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/documents/{document.id}/chunks")

    # When she renames it to sharing.md
    tab.get_by_test_id("open-rename").click()
    tab.get_by_test_id("rename-input").fill("sharing.md")
    tab.get_by_test_id("rename-submit").click()

    # Then the dialog comes back open with her text and the reason, and nothing was renamed
    expect(tab.get_by_test_id("rename-dialog")).to_be_visible()
    expect(tab.get_by_test_id("rename-error")).to_contain_text("already names a document")
    expect(tab.get_by_test_id("rename-input")).to_have_value("sharing.md")
    assert_accessible(tab)
    assert_no_sideways_scroll(tab)
    screenshot(tab, "kb-document-rename-refused")

    # When she types a free name instead
    tab.get_by_test_id("rename-input").fill("limits.md")
    tab.get_by_test_id("rename-submit").click()

    # Then the document carries it
    expect(tab.get_by_test_id("document-name")).to_have_text("limits.md")


def test_deleting_a_collection_asks_first_then_deletes_it(page_as, handbook: Collection, viewport) -> None:
    # Given alice on her handbook
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/collections/{handbook.id}/documents")

    # When she opens Delete, then cancels
    tab.get_by_test_id("open-delete").click()
    dialog = tab.get_by_test_id("delete-dialog")
    expect(dialog).to_contain_text("Its 2 documents")
    assert_accessible(tab)
    screenshot(tab, "kb-collection-delete-confirm")
    dialog.get_by_role("button", name="Cancel").click()

    # Then nothing happened
    expect(dialog).to_be_hidden()
    assert Collection.objects.filter(pk=handbook.id).exists()

    # When she opens it again and confirms
    tab.get_by_test_id("open-delete").click()
    tab.get_by_test_id("delete-submit").click()

    # Then she is on the collections page, told it is gone
    expect(tab.locator(".flash")).to_contain_text("Deleted the collection Operations handbook")
    assert not Collection.objects.exists()
    assert_no_sideways_scroll(tab)


def test_the_owner_renames_then_deletes_a_chat(page_as, answered_chat: KbChat, viewport) -> None:
    # Given alice on her chat
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/chats/{answered_chat.id}")
    assert_no_sideways_scroll(tab)
    screenshot(tab, "kb-chat-owner")

    # When she renames it
    tab.get_by_test_id("open-rename").click()
    tab.get_by_test_id("rename-input").fill("Quota, freed")
    tab.get_by_test_id("rename-submit").click()

    # Then the title changes
    expect(tab.get_by_test_id("chat-title")).to_have_text("Quota, freed")

    # When she deletes it and confirms
    tab.get_by_test_id("open-delete").click()
    expect(tab.get_by_test_id("delete-dialog")).to_contain_text("Bob")
    tab.get_by_test_id("delete-submit").click()

    # Then she is on her chats, and the chat is gone
    expect(tab.locator(".flash")).to_contain_text("Deleted the chat Quota, freed")
    assert not KbChat.objects.exists()


def test_the_collection_and_chat_lists_fit_a_phone(page_as, answered_chat: KbChat, viewport) -> None:
    # Given alice's handbook and chat
    tab = page_as("alice", viewport=viewport)

    # When she opens the collections, the handbook's documents and her chats
    for path, name in (
        ("/kb/collections", "kb-collections"),
        (f"/kb/collections/{answered_chat.collections.get().id}/documents", "kb-documents"),
        ("/kb/chats", "kb-chats"),
    ):
        tab.goto(path)

        # Then each passes axe and fits the screen
        assert_accessible(tab)
        assert_no_sideways_scroll(tab)
        screenshot(tab, name)


def test_a_tapped_marker_opens_its_source_with_no_preview_over_it(page_as, answered_chat: KbChat) -> None:
    # Given alice's answered chat on a phone's touch screen (390 px)
    tab = page_as("alice", viewport=PHONE, touch=True)
    tab.goto(f"/kb/chats/{answered_chat.id}")
    marker = tab.get_by_test_id("message-assistant").get_by_test_id("marker").first
    source = tab.locator(marker.get_attribute("href"))

    # When she taps [1]
    marker.tap()

    # Then its source is open below the answer, and no preview lies over any part of it
    expect(source).to_have_attribute("open", "")
    expect(tab.get_by_test_id("citation-preview").first).to_be_hidden()
    shown = source.bounding_box()
    for preview in tab.get_by_test_id("citation-preview").all():
        box = preview.bounding_box() if preview.is_visible() else None
        assert not box or box["y"] + box["height"] <= shown["y"] or box["y"] >= shown["y"] + shown["height"]
    screenshot(tab, "kb-citation-tapped")

    # When she moves on and comes back to the marker with the keyboard / Then its preview shows again
    tab.locator("h1").tap()
    marker.focus()
    expect(tab.get_by_test_id("citation-preview").first).to_be_visible()
