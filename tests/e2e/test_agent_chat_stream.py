"""In a real browser, with the local OpenAI-compatible test server as the model agent's provider: the
reply shows while the model writes it, each tool call listed as it runs; then the stored reply takes
its place, as Markdown with linked [n] sources, its trail collapsed under it (command, exit code,
output), on the item page and on an investigation page alike; the item's Sandbox card follows."""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from collab.actor import Actor
from knowledge import services as knowledge_services
from knowledge.ingest import ingest_document
from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot
from tests.fixtures.llm import Call, Reply, Stream
from workspace.agent.models import ItemMessage
from workspace.investigations import services as investigation_services

pytestmark = pytest.mark.django_db(transaction=True)

QUOTAS = (
    "# Quotas\n\nWhen a quota limit is hit the request is refused with status 507 and nothing is evicted.\n\n"
    "To free capacity open the my-resources screen and close a sandbox you no longer need."
)


def test_the_item_chat_streams_the_reply_then_shows_it_stored_with_its_trail(
    page_as, make_notebook, model_agent, viewport
):
    # Given alice's notebook with notes.txt, and a model that runs a command, then writes its reply
    # and waits before finishing
    notebook = make_notebook(owner="alice", files={"notes.txt": b"disk is 91% full\n"})
    release = threading.Event()
    model_agent.push(
        Reply(tool_calls=[Call("run_command", {"command": "cat notes.txt"})]),
        Stream(["The notes say the **disk** ", "is 91% full."], hold=release),
    )
    tab = page_as("alice", viewport=viewport)
    tab.goto(f"/a/notebook/items/{notebook.pk}")
    expect(tab.get_by_test_id("answering-agent")).to_contain_text("The model agent answers: the model test-model")

    # When she asks about her notes
    tab.get_by_test_id("chat-content").fill("What do my notes say?")
    tab.get_by_test_id("chat-send").click()

    # Then the command is listed as done and the reply shows while the model is still writing
    expect(tab.get_by_test_id("live-step")).to_have_text("ran cat notes.txt: exit 0")
    expect(tab.locator("[data-testid=pending-agent] [data-testid=pending-body]")).to_have_text(
        "The notes say the **disk** is 91% full."
    )
    expect(tab.get_by_test_id("chat-status")).to_have_text("The agent is answering…")
    assert not ItemMessage.objects.filter(role="agent").exists()
    screenshot(tab, "agent-reply-streaming")

    # When the model finishes
    release.set()

    # Then the stored reply replaces it, as Markdown, with its trail collapsed under it
    reply = tab.locator("[data-testid=message][data-role=agent]").last
    expect(reply.locator("strong")).to_have_text("disk")
    expect(tab.locator(".msg-pending")).to_have_count(0)
    trail = reply.get_by_test_id("trail")
    expect(trail).to_contain_text("What the agent did (1 step)")
    expect(trail.get_by_test_id("step-command")).to_be_hidden()
    # And opening it shows the command, its exit code and its output
    trail.locator("summary").first.click()
    trail.get_by_test_id("step").locator("summary").click()
    expect(trail.get_by_test_id("step-command")).to_have_text("$ cat notes.txt")
    expect(trail.get_by_test_id("step-exit")).to_have_text("Exit code 0")
    expect(trail.get_by_test_id("step-output")).to_contain_text("disk is 91% full")
    expect(tab.get_by_test_id("chat-content")).to_have_value("")
    # And the Sandbox card shows the sandbox the agent's command opened, without a page load
    expect(tab.get_by_test_id("sandbox-id")).to_be_visible()
    assert_no_sideways_scroll(tab)
    assert_accessible(tab)
    screenshot(tab, "agent-reply-stored")


def test_an_investigation_answer_links_its_sources_and_a_failing_model_is_said_in_one_sentence(
    page_as, model_agent, settings
):
    # Given alice's investigation, a handbook, and a model that asks it, then cites [1]
    collection = knowledge_services.collection_create(actor=Actor("alice"), name="Handbook")
    document = knowledge_services.document_upload(
        collection_id=collection.id, actor=Actor("alice"), filename="quotas.md", content_type="text/markdown",
        data=QUOTAS.encode(),
    )  # fmt: skip
    ingest_document(document_id=document.id, content_version=document.content_version, user_id="alice")
    investigation = investigation_services.investigation_create(title="Quota outage", actor=Actor("alice"))
    model_agent.push(
        Reply(tool_calls=[Call("ask_knowledge", {"question": "free capacity quota"})]),
        Stream(["Close a sandbox on ", "my-resources [1]."]),
    )
    tab = page_as("alice")
    tab.goto(f"/investigations/{investigation.pk}")

    # When she asks how to free capacity
    tab.get_by_test_id("chat-content").fill("How do we free capacity?")
    tab.get_by_test_id("chat-send").click()

    # Then the stored answer's marker links to quotas.md, whose source opens under the answer
    answer = tab.locator("[data-testid=message][data-role=agent]").last
    marker = answer.get_by_test_id("marker")
    expect(marker).to_have_count(1)
    expect(answer.get_by_test_id("citation")).to_contain_text("quotas.md")
    marker.click()
    expect(answer.get_by_test_id("cited-chunk")).to_be_visible()
    expect(answer.get_by_test_id("trail")).to_contain_text("What the agent did (1 step)")
    assert_accessible(tab)
    screenshot(tab, "agent-investigation-answer")

    # When the model server fails on the next message
    settings.WORKSPACE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    tab.get_by_test_id("chat-content").fill("And then?")
    tab.get_by_test_id("chat-send").click()

    # Then the reply says so in one sentence and her message is kept
    last = tab.locator("[data-testid=message][data-role=agent]").last
    expect(last).to_contain_text("The model server could not be reached, so this turn ended.")
    expect(tab.locator("[data-testid=message][data-role=user]").last).to_contain_text("And then?")
