"""Which agent answers, and agent replies on the item and investigation pages: Markdown with linked
[n] citations and previews (the knowledge-base chat's component), the turn's trail collapsed under
the reply; the app's choice of agent, the start-up warning when no provider is connected."""

from __future__ import annotations

import logging

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ImproperlyConfigured

from knowledge.markup import MAX_LINKED_MARKERS
from knowledge.models import Chunk
from tests.fixtures.items import item_url
from workspace.agent.apps import model_agent_warnings
from workspace.agent.messages import message_append
from workspace.agent.models import ItemMessage
from workspace.agent.protocol import TrailStep

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}


def _page_of(api, item) -> str:
    path = f"/investigations/{item.pk}" if item.app_slug == "rca" else item_url(item)
    response = api.get(path, **HTML)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture(params=["notebook", "rca"])
def conversation_item(request, make_item, make_investigation):
    """An item of each kind whose page shows a conversation: a notebook, an investigation."""
    return make_item() if request.param == "notebook" else make_investigation().item


def _cited_reply(item, handbook, content: str = "**Close** a sandbox [1].\n\n<script>alert(1)</script>") -> ItemMessage:
    chunk = Chunk.objects.filter(document__filename="quotas.md").order_by("ordinal").first()
    citation = {
        "marker": 1, "collection_id": handbook.id, "document_id": chunk.document_id, "document_name": "quotas.md",
        "source_chunk_ids": [chunk.pk], "quote": "close a sandbox you no longer need",
    }  # fmt: skip
    steps = [
        TrailStep(kind="note", summary="3 earlier messages of this conversation were left out."),
        TrailStep(
            kind="tool", tool="run_command", arguments={"command": "df -h /workspace"}, summary="ran df -h: exit 0",
            output="exit code 0\nFilesystem 1G\n", detail={"exit_code": 0, "timed_out": False},
        ),
        TrailStep(
            kind="tool", tool="write_file", arguments={"path": "notes.md", "content": "x"}, summary="wrote notes.md",
            output="Wrote notes.md: 1 bytes.", detail={"path": "notes.md", "bytes": 1},
        ),
        TrailStep(kind="tool", tool="mention_user", arguments={"user_ids": ["bob"]}, summary="mentioned bob",
                  output="Mentioned bob.", detail={"user_ids": ["bob"]}),
    ]  # fmt: skip
    return message_append(
        item=item,
        role=ItemMessage.Role.AGENT,
        content=content,
        user_id=None,
        citations=[citation],
        steps=steps,
    )


def test_an_agent_reply_renders_as_markdown_with_a_linked_marker_its_preview_and_its_source(
    alice_api, conversation_item, handbook
):
    # Given an agent reply in Markdown citing the handbook's quotas.md as [1], with raw HTML in it
    reply = _cited_reply(conversation_item, handbook)
    # When alice opens the page
    page = _page_of(alice_api, conversation_item)
    # Then the reply is Markdown, its marker links to its source with a preview, and the HTML is text
    assert "<strong>Close</strong>" in page
    assert f'<a class="kb-marker" href="#cite-{reply.pk}-1"' in page
    assert 'data-testid="citation-preview"' in page
    assert f'id="cite-{reply.pk}-1"' in page
    assert "/chunks#chunk-" in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_reply_of_50000_characters_of_markers_renders_a_page_under_a_megabyte_with_one_preview(
    alice_api, conversation_item, handbook, django_assert_max_num_queries
):
    # Given an agent reply that is 50,000 characters of [1], citing quotas.md (about 1.3 KB of preview)
    _cited_reply(conversation_item, handbook, content="[1]" * 16_666)
    # When alice opens the page
    with django_assert_max_num_queries(10):
        page = _page_of(alice_api, conversation_item)
    # Then the page stays under a megabyte: the preview is on it once, and the markers past the
    # message's share of links are text
    assert len(page.encode()) < 1_000_000
    assert page.count('data-testid="citation-preview"') == 1
    assert page.count('data-testid="marker"') == MAX_LINKED_MARKERS


def test_a_replys_marker_naming_no_source_is_not_on_the_page(alice_api, conversation_item):
    # Given an agent reply, stored before its markers were checked, citing [7] with no source
    message_append(item=conversation_item, role=ItemMessage.Role.AGENT, content="Restart the worker [7].", user_id=None)
    # When alice opens the page / Then the reply is there without the marker
    page = _page_of(alice_api, conversation_item)
    assert "Restart the worker" in page
    assert "[7]" not in page


def test_the_trail_of_a_reply_is_collapsed_under_it(alice_api, conversation_item, handbook):
    # Given an agent reply whose turn left a note, ran a command, wrote a file and mentioned bob
    _cited_reply(conversation_item, handbook)
    # When alice opens the page
    page = _page_of(alice_api, conversation_item)
    # Then the trail is a closed <details> listing each step: the note, the command with its exit code and output,
    # the file written, the mention sent
    assert '<details class="agent-trail" data-testid="trail">' in page
    assert "What the agent did (4 steps)" in page
    assert "3 earlier messages of this conversation were left out." in page
    assert "$ df -h /workspace" in page
    assert "Exit code 0" in page
    assert "Filesystem 1G" in page
    assert "Wrote <code>notes.md</code>, 1 bytes" in page
    assert 'data-testid="step-mentioned">Mentioned <span class="chip">@bob</span>' in page


def test_a_users_message_stays_plain_text(alice_api, conversation_item):
    # Given alice's message with Markdown and HTML in it
    message_append(item=conversation_item, role=ItemMessage.Role.USER, content="**not bold** <b>x</b>", user_id="alice")
    # When she opens the page / Then it shows as she typed it
    page = _page_of(alice_api, conversation_item)
    assert "**not bold** &lt;b&gt;x&lt;/b&gt;" in page


def test_the_investigation_page_reads_a_long_conversation_in_few_queries(
    alice_api, make_investigation, handbook, django_assert_max_num_queries
):
    # Given an investigation with thirty cited agent replies, each with its trail
    investigation = make_investigation()
    for _ in range(30):
        _cited_reply(investigation.item, handbook)
    # When alice opens its page / Then the queries do not grow with the replies
    with django_assert_max_num_queries(8):
        _page_of(alice_api, investigation.item)


def test_a_stranger_gets_404_on_the_pages_and_no_conversation(carol_api, conversation_item):
    # Given an item of alice's with a message
    message_append(item=conversation_item, role=ItemMessage.Role.USER, content="secret plan", user_id="alice")
    path = (
        f"/investigations/{conversation_item.pk}"
        if conversation_item.app_slug == "rca"
        else item_url(conversation_item)
    )
    # When carol opens its page / Then it is 404 and shows nothing of it
    response = carol_api.get(path, **HTML)
    assert response.status_code == 404
    assert "secret plan" not in response.content.decode()


def test_the_page_says_the_model_agent_answers_and_which_model(alice_api, conversation_item, model_agent):
    # Given apps choosing the model agent, with the test server's model connected
    # When alice opens the page
    page = _page_of(alice_api, conversation_item)
    # Then it says the model agent answers, with the model's name
    assert 'data-agent="model"' in page
    assert "The model agent answers: the model <strong>test-model</strong>" in page


def test_without_a_provider_an_app_asking_for_the_model_keeps_the_deterministic_agent_and_says_so(
    alice_api, conversation_item, model_apps
):
    # Given apps choosing the model agent and no provider
    # When alice opens the page
    page = _page_of(alice_api, conversation_item)
    # Then it says the built-in agent answers, and that the model the app asks for is not connected
    assert 'data-agent="deterministic"' in page
    assert "This app asks for the model agent, but no model provider is connected." in page
    # And the deterministic agent answers her message
    reply = alice_api.post(item_url(conversation_item, "/messages"), {"content": "$ echo hi"}, format="json")
    assert reply.json()["replies"][0]["content"] == "```\n$ echo hi\nhi\n```\n[exit 0]"


def test_start_up_says_which_apps_ask_for_the_model_without_a_provider(settings, model_apps, caplog):
    # Given the shipped apps choosing the model agent, and no provider
    # When the agent app starts
    with caplog.at_level(logging.WARNING, logger="workspace.agent"):
        django_apps.get_app_config("agent").ready()
    # Then it warns once per app, naming the file, the app and the missing setting
    warned = [record.getMessage() for record in caplog.records if record.name == "workspace.agent"]
    assert len(warned) == 2
    assert str(model_apps / "notebook.toml") in warned[0]
    assert "app 'notebook' asks for the model agent" in warned[0]
    assert "WORKSPACE_LLM_BASE_URL" in warned[0]
    # And with a provider configured, nothing is said
    settings.WORKSPACE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert model_agent_warnings() == []


def test_apps_that_do_not_ask_for_the_model_keep_the_deterministic_agent_with_a_provider(
    alice_api, make_item, llm_provider
):
    # Given the shipped apps (no agent key) and a provider connected
    # When alice sends a `$ ` line
    reply = alice_api.post(item_url(make_item(), "/messages"), {"content": "$ echo hi"}, format="json").json()
    # Then the deterministic agent runs it and the model server hears nothing
    assert reply["replies"][0]["content"] == "```\n$ echo hi\nhi\n```\n[exit 0]"
    assert llm_provider.chat_requests == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_AGENT_MAX_TOOL_CALLS", 0),
        ("WORKSPACE_AGENT_TURN_SECONDS", 0),
        ("WORKSPACE_AGENT_CONTEXT_TOKENS", 10),
        ("WORKSPACE_AGENT_TOOL_OUTPUT_CHARS", -1),
    ],
)
def test_a_turn_limit_that_leaves_no_room_for_a_turn_stops_start_up_naming_it(settings, name, value):
    # Given one of the model agent's turn limits set too low
    setattr(settings, name, value)
    # When the agent app starts / Then it refuses, naming the setting
    with pytest.raises(ImproperlyConfigured, match=name):
        django_apps.get_app_config("agent").ready()
