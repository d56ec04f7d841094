"""In a real browser, with the local OpenAI-compatible test server as the model: the answer shows
while the model writes it, then the stored answer with its linked markers takes its place; a model
failing midway gives way to the quoted fallback, said in one sentence."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from knowledge import services
from knowledge.ingest import ingest_document
from knowledge.models import KbChat, KbChatMessage
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from tests.fixtures.llm import Stream

pytestmark = pytest.mark.django_db(transaction=True)

QUOTAS = (
    "# Quotas\n\nWhen a quota limit is hit the request is refused with status 507 and nothing is evicted.\n\n"
    "To free capacity open the my-resources screen and close a sandbox you no longer need."
)
QUESTION = "How do I free capacity when a quota is hit?"


@pytest.fixture
def chat(settings: Any, llm_provider) -> KbChat:
    """Alice's empty chat over a one-document handbook, answered by the test server's model."""
    settings.WORKSPACE_LLM_TIMEOUT = 20.0
    collection = services.collection_create(actor=Actor("alice"), name="Handbook")
    document = services.document_upload(
        collection_id=collection.id, actor=Actor("alice"), filename="quotas.md", content_type="text/markdown",
        data=QUOTAS.encode(),
    )  # fmt: skip
    ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    return services.chat_create(actor=Actor("alice"), title="Quota help", collection_ids=[collection.id])


def test_the_answer_shows_as_it_is_written_then_as_stored(page_as, chat: KbChat, llm_provider, viewport) -> None:
    # Given a model that writes a cited sentence, then waits before finishing
    release = threading.Event()
    llm_provider.push(Stream(["To free capacity, ", "close a sandbox on my-resources [1]", "."], hold=release))
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/kb/chats/{chat.id}")

    # When alice asks
    tab.get_by_test_id("question").fill(QUESTION)
    tab.get_by_test_id("ask").click()

    # Then the sentence shows while the model is still writing, the page says it is answering
    pending = tab.locator(".kb-pending [data-testid=message-body]").last
    expect(pending).to_have_text("To free capacity, close a sandbox on my-resources [1].")
    expect(tab.get_by_test_id("ask-status")).to_have_text("Answering…")
    assert not KbChatMessage.objects.filter(chat=chat).exists()
    screenshot(tab, "kb-answer-streaming")

    # When the model finishes
    release.set()

    # Then the stored answer replaces it: its marker links to its source, and the question box is empty
    answer = tab.get_by_test_id("message-assistant").last
    expect(answer.get_by_test_id("marker")).to_have_count(1)
    expect(answer.get_by_test_id("citation")).to_contain_text("quotas.md")
    expect(tab.locator(".kb-pending")).to_have_count(0)
    expect(tab.get_by_test_id("question")).to_have_value("")
    assert list(KbChatMessage.objects.filter(chat=chat).values_list("content", flat=True).order_by("sequence")) == [
        QUESTION,
        "To free capacity, close a sandbox on my-resources [1].",
    ]
    # And the model was asked once for the one question
    assert len(llm_provider.chat_requests) == 1
    assert_no_sideways_scroll(tab)
    assert_accessible(tab)
    screenshot(tab, "kb-answer-stored")


def test_a_question_asked_with_a_double_click_asks_the_model_once(page_as, chat: KbChat, llm_provider) -> None:
    # Given a model that answers with a cited sentence (and would answer a second request too)
    llm_provider.push(Stream(["Close a sandbox [1]."]), Stream(["Asked twice [1]."]))
    tab = page_as("alice")
    tab.goto(f"/kb/chats/{chat.id}")

    # When alice double-clicks Ask
    tab.get_by_test_id("question").fill(QUESTION)
    tab.get_by_test_id("ask").dblclick()

    # Then one answer is stored and the model was asked once
    expect(tab.get_by_test_id("message-assistant")).to_have_count(1)
    expect(tab.get_by_test_id("question")).to_have_value("")
    assert KbChatMessage.objects.filter(chat=chat, role="assistant").count() == 1
    assert len(llm_provider.chat_requests) == 1


def test_a_model_failing_midway_gives_way_to_the_quoted_answer(page_as, chat: KbChat, llm_provider) -> None:
    # Given a model that writes a cited sentence, then its connection is cut
    llm_provider.push(Stream(["Close a sandbox [1].", " And"], then="cut"))
    tab = page_as("alice")
    tab.goto(f"/kb/chats/{chat.id}")

    # When alice asks
    tab.get_by_test_id("question").fill(QUESTION)
    tab.get_by_test_id("ask").click()

    # Then the stored answer says in one sentence what happened and quotes the handbook with its marker
    answer = tab.get_by_test_id("message-assistant").last
    expect(answer).to_contain_text(
        "The model server stopped in the middle of its answer, so this answer quotes the documents instead."
    )
    expect(answer.get_by_test_id("marker")).to_have_count(1)
    expect(tab.locator(".kb-pending")).to_have_count(0)
    assert_accessible(tab)


def test_the_chat_page_says_which_model_writes_the_answers(page_as, chat: KbChat) -> None:
    # Given the test server's model connected / When alice opens her chat / Then the form names it
    tab = page_as("alice")
    tab.goto(f"/kb/chats/{chat.id}")
    expect(tab.get_by_test_id("answerer")).to_contain_text("The model test-model writes the answer")
