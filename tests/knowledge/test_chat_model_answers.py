"""KB chats answered by the connected model: the stored answer over the API, the answer streamed as
server-sent events, citation events as for any answer, and nothing half-stored when it fails."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from typing import Any

import pytest

from collab import clock
from collab.actor import Actor
from knowledge import services
from knowledge.answers import Answer, Restart
from knowledge.markup import MAX_LINKED_MARKERS
from knowledge.models import CitationEvent, CitationEventChunk, KbChat, KbChatMessage
from knowledge.views import answer_event_frames
from tests.fixtures.llm import TEST_API_KEY, HttpError, Stream

pytestmark = pytest.mark.django_db

QUESTION = "How do I free capacity when a quota limit is hit?"
SSE = "text/event-stream"
ASKED_BY_ALICE = {"actor": Actor("alice"), "content": QUESTION}


def _events(response: Any) -> list[tuple[str, dict[str, Any]]]:
    body = b"".join(response.streaming_content).decode()
    frames = [frame for frame in body.split("\n\n") if frame]
    return [
        (
            re.search(r"^event: (.*)$", frame, re.M).group(1),
            json.loads(re.search(r"^data: (.*)$", frame, re.M).group(1)),
        )
        for frame in frames
    ]


@pytest.fixture
def ask_streamed(django_capture_on_commit_callbacks, api_client_for):
    def send(chat_id: str, question: str, *, user_id: str = "alice") -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return api_client_for(user_id).post(
                f"/kb/chats/{chat_id}/messages", {"content": question}, format="json", HTTP_ACCEPT=SSE
            )

    return send


def test_the_api_returns_the_stored_model_answer(handbook, make_chat, ask, llm_provider):
    # Given alice's chat over the handbook and a model that cites passage 1 and a passage 5 it was not given
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Open my-resources and ", "close a sandbox [1]", ". Or [5]."]))

    # When she asks over the API
    response = ask(chat.id, QUESTION)

    # Then the answer is 201 and is the stored one, markers checked
    assert response.status_code == 201
    answer = response.json()["answer"]
    assert answer["content"] == "Open my-resources and close a sandbox [1]. Or."
    stored = KbChatMessage.objects.get(pk=answer["id"])
    assert stored.content == answer["content"]
    assert [citation["marker"] for citation in answer["citations"]] == [1]


def test_a_lone_surrogate_in_a_model_answer_is_replaced_and_the_exchange_stored(handbook, make_chat, ask, llm_provider):
    # Given a model whose answer holds a lone surrogate: valid JSON ("\ud800") no database encodes
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Close a sandbox [1] \ud800", " now."]))

    # When alice asks over the API
    response = ask(chat.id, QUESTION)

    # Then the exchange is stored, the surrogate replaced
    assert response.status_code == 201
    assert response.json()["answer"]["content"] == "Close a sandbox [1] \ufffd now."
    assert KbChatMessage.objects.filter(content="Close a sandbox [1] \ufffd now.").exists()


def test_a_streamed_answer_comes_as_deltas_then_the_stored_exchange(handbook, make_chat, ask_streamed, llm_provider):
    # Given alice's chat over the handbook and a model that writes its answer in three pieces
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Open my-resources ", "and close a sandbox [1]", "."]))

    # When she asks with Accept: text/event-stream
    response = ask_streamed(chat.id, QUESTION)

    # Then the answer streams as deltas that make up the stored text, then one answer event: the stored exchange
    assert response.status_code == 200
    assert response["Content-Type"] == SSE
    events = _events(response)
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) >= 2
    (name, exchange) = events[-1]
    assert name == "answer"
    assert "".join(deltas) == exchange["answer"]["content"] == "Open my-resources and close a sandbox [1]."
    assert KbChatMessage.objects.filter(chat=chat).count() == 2
    assert exchange["question"]["content"] == QUESTION


def test_a_streamed_answer_never_shows_a_marker_naming_no_passage(handbook, make_chat, ask_streamed, llm_provider):
    # Given a model that cites passage 1, then passages 7, 99 and 1234 it was not given
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Close a sandbox [1] or [7", "] [99] [1234]", "."]))

    # When alice asks with Accept: text/event-stream
    events = _events(ask_streamed(chat.id, QUESTION))

    # Then no delta holds an invented marker, and the deltas make up the stored answer
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert not any(invented in "".join(deltas) for invented in ("[7", "[99", "[1234"))
    assert "".join(deltas) == events[-1][1]["answer"]["content"] == "Close a sandbox [1] or."


@pytest.mark.parametrize("pattern", ["[1]", "[1]x"], ids=["markers", "markers-and-letters"])
def test_an_answer_of_50000_characters_of_markers_renders_a_page_under_a_megabyte_with_one_preview(
    handbook, make_chat, ask, browser_for, llm_provider, django_assert_max_num_queries, pattern
):
    # Given a model whose answer is 50,000 characters of one marker (each preview is about 1 KB)
    chat = make_chat(handbook)
    llm_provider.push(Stream([pattern * (50_000 // len(pattern))]))
    assert ask(chat.id, QUESTION).status_code == 201

    # When alice opens the chat page
    with django_assert_max_num_queries(10):
        response = browser_for("alice").get(f"/kb/chats/{chat.id}")

    # Then the page stays under a megabyte, with the cited passage's preview on it once
    assert response.status_code == 200
    assert len(response.content) < 1_000_000
    page = response.content.decode()
    assert page.count('data-testid="citation-preview"') == 1
    assert page.count('data-testid="marker"') == MAX_LINKED_MARKERS


def test_citation_events_of_a_model_answer_count_as_any_answer_does(
    make_collection, upload, make_chat, ask, alice_api, llm_provider
):
    # Given a document of four adjacent chunks on disk quota (one merged passage)
    collection = make_collection()
    text = "\n\n".join(f"Part {n}. " + "Disk quota is checked when a file is written. " * 14 for n in range(4))
    upload(collection.id, "disk.txt", text)
    chat = make_chat(collection)
    llm_provider.push(Stream(["Disk quota is checked on every write [1]."]))

    # When alice asks about disk quota and the model cites that passage
    answer = ask(chat.id, "When is disk quota checked?").json()["answer"]

    # Then one event is written for marker 1 with its four chunks, and the counts follow: once for
    # the collection and the document, once for each merged chunk
    (citation,) = answer["citations"]
    assert len(citation["source_chunk_ids"]) == 4
    event = CitationEvent.objects.get()
    assert (event.marker, event.message_id, event.origin_id) == (1, answer["id"], chat.id)
    assert set(CitationEventChunk.objects.values_list("chunk_id", flat=True)) == set(citation["source_chunk_ids"])
    document_id = citation["document_id"]
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 1
    counts = [chunk["cited"] for chunk in alice_api.get(f"/kb/documents/{document_id}/chunks").json()]
    assert counts == [1, 1, 1, 1]
    assert alice_api.get("/kb/collections").json()[0]["cited"] == 1


def test_a_failure_midway_restarts_the_stream_and_stores_only_the_fallback(
    handbook, make_chat, ask_streamed, llm_provider
):
    # Given a model that writes a cited sentence, then its connection is cut
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Open my-resources [1].", " And then"], then="cut"))

    # When alice asks with Accept: text/event-stream
    events = _events(ask_streamed(chat.id, QUESTION))

    # Then the page hears the deltas, a restart saying why, and the fallback as the stored answer
    names = [name for name, _ in events]
    assert names[-3:] == ["restart", "delta", "answer"]
    assert events[-3][1]["detail"] == "The model server stopped in the middle of its answer."
    stored = events[-1][1]["answer"]["content"]
    assert stored.startswith("The model server stopped in the middle of its answer, so this answer quotes")
    # and nothing of the cut answer is stored: the question and the fallback only, events for the fallback
    assert list(KbChatMessage.objects.filter(chat=chat).values_list("content", flat=True).order_by("sequence")) == [
        QUESTION,
        stored,
    ]
    assert "And then" not in stored
    assert CitationEvent.objects.count() == len(events[-1][1]["answer"]["citations"])


def test_a_failing_provider_keeps_the_question_and_says_what_happened(handbook, make_chat, ask, llm_provider):
    # Given a provider that answers 503
    chat = make_chat(handbook)
    llm_provider.push(HttpError(503))

    # When alice asks
    response = ask(chat.id, QUESTION)

    # Then it is 201: the question is kept, and the answer says what happened, then quotes the documents
    assert response.status_code == 201
    body = response.json()
    assert body["question"]["content"] == QUESTION
    assert body["answer"]["content"].startswith("The model server failed (HTTP 503), so this answer quotes")
    assert body["answer"]["citations"]


class ChatDeletingAnswerer:
    """Writes a piece, then the chat is deleted behind it (its owner, in another tab), then answers."""

    def answer(self, *, question, passages):
        raise AssertionError("streams only")

    def stream(self, *, question, passages):
        yield "Half an answer"
        KbChat.objects.all().delete()
        yield Restart(reason="irrelevant")
        yield Answer(text="Whole [1].", citations=())


def test_a_chat_deleted_while_the_answer_is_written_stores_nothing(handbook, make_chat, ask_streamed, settings):
    # Given an answerer during whose answer the chat is deleted
    settings.KNOWLEDGE_ANSWERER = "tests.knowledge.test_chat_model_answers.ChatDeletingAnswerer"
    chat = make_chat(handbook)

    # When alice asks with Accept: text/event-stream
    events = _events(ask_streamed(chat.id, QUESTION))

    # Then the stream ends with a 404 error event, and no message or event is stored
    assert events[-1] == ("error", {"error": "not_found", "detail": events[-1][1]["detail"]})
    assert not KbChatMessage.objects.exists()
    assert not CitationEvent.objects.exists()


def test_leaving_the_page_mid_answer_still_stores_the_exchange(handbook, make_chat, llm_provider):
    # Given a model that writes its answer in three pieces
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Open my-resources ", "and close a sandbox [1]", "."]))

    # When alice's page reads the first event and is closed
    frames = answer_event_frames(
        services.chat_answer_events(services.chat_question_check(**ASKED_BY_ALICE, chat_id=chat.id))
    )
    first = next(frames)
    frames.close()  # what the server does once the client has gone

    # Then the answer was still finished and stored whole with her question
    assert first.startswith(b"event: delta")
    assert list(KbChatMessage.objects.filter(chat=chat).values_list("content", flat=True).order_by("sequence")) == [
        QUESTION,
        "Open my-resources and close a sandbox [1].",
    ]


@pytest.mark.parametrize(
    ("user_id", "content", "status"),
    [("bob", QUESTION, 404), ("alice", "   ", 400), ("alice", "quota\x00limits", 400), ("alice", "[" * 4001, 400)],
    ids=["a stranger", "an empty question", "a question with a NUL", "a question too long"],
)
def test_refusals_come_as_json_before_any_event_and_ask_no_model(
    handbook, make_chat, ask_streamed, llm_provider, user_id, content, status
):
    # Given alice's chat
    chat = make_chat(handbook)

    # When a stranger asks, or alice asks nothing or a question with a NUL, with Accept: text/event-stream
    response = ask_streamed(chat.id, content, user_id=user_id)

    # Then it is a JSON refusal, nothing is stored and the model was never asked
    assert response.status_code == status
    assert "error" in json.loads(response.content)
    assert not KbChatMessage.objects.exists()
    assert llm_provider.chat_requests == []


def test_a_shared_reader_is_refused_before_any_event(handbook, make_chat, ask_streamed, alice_api, llm_provider):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    alice_api.post(f"/kb/chats/{chat.id}/share", {"user_ids": ["bob"]}, format="json")

    # When bob asks in it with Accept: text/event-stream
    response = ask_streamed(chat.id, QUESTION, user_id="bob")

    # Then it is 403 read_only_share, nothing is stored and the model was never asked
    assert response.status_code == 403
    assert json.loads(response.content)["error"] == "read_only_share"
    assert not KbChatMessage.objects.exists()
    assert llm_provider.chat_requests == []


def test_the_key_is_not_on_the_chat_page_or_in_the_log(handbook, make_chat, ask, browser_for, llm_provider, caplog):
    # Given every logger at DEBUG and a provider that echoes the key as it refuses it
    caplog.set_level(logging.DEBUG)
    chat = make_chat(handbook)
    llm_provider.push(HttpError(401, f"Incorrect API key provided: {TEST_API_KEY}"))

    # When alice asks, then opens her chat page
    ask(chat.id, QUESTION)
    page = browser_for("alice").get(f"/kb/chats/{chat.id}")

    # Then the page says the key was refused without showing it, and no log line holds it
    assert "refused the configured API key" in page.content.decode()
    assert TEST_API_KEY not in page.content.decode()
    assert all(TEST_API_KEY not in record.getMessage() for record in caplog.records)


def test_any_provider_answers_in_a_chat_with_markers_that_name_its_citations(handbook, make_chat, ask, any_provider):
    # Given alice's chat over the handbook, and the test server or a real model server
    chat = make_chat(handbook)

    # When she asks a question the handbook answers
    body = ask(chat.id, QUESTION).json()

    # Then every marker names one of the answer's citations, and each citation is one event
    answer = body["answer"]
    markers = {int(number) for number in re.findall(r"\[(\d+)\]", answer["content"])}
    assert markers == {citation["marker"] for citation in answer["citations"]}
    assert CitationEvent.objects.count() == len(answer["citations"])


def test_any_provider_streams_an_answer_into_a_chat(handbook, make_chat, ask_streamed, any_provider):
    # Given alice's chat over the handbook, and the test server or a real model server
    chat = make_chat(handbook)

    # When she asks with Accept: text/event-stream
    events = _events(ask_streamed(chat.id, QUESTION))

    # Then the stream ends with the stored exchange, and both messages are stored
    assert events[-1][0] == "answer"
    assert KbChatMessage.objects.filter(chat=chat).count() == 2


@pytest.fixture
def all_of_alices_slots_taken(settings):
    """alice already runs as many commands or model answers as she may (one, here)."""
    from collab.models import CommandSlot

    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 1
    CommandSlot.objects.create(user_id="alice", slot=0, expires_at=clock.now() + timedelta(minutes=5))
    return CommandSlot


@pytest.mark.parametrize("streamed", [False, True])
def test_a_model_answer_while_all_of_the_persons_slots_are_taken_is_429_and_asks_no_model(
    handbook, make_chat, ask, ask_streamed, llm_provider, all_of_alices_slots_taken, streamed
):
    # Given alice's chat, and a command of hers holding her one slot
    chat = make_chat(handbook)

    # When she asks a question the model would answer
    response = (ask_streamed if streamed else ask)(chat.id, QUESTION)

    # Then it is 429 with Retry-After, as JSON before any event; nothing is stored, no model asked
    assert response.status_code == 429
    assert response["Retry-After"]
    assert json.loads(response.content)["error"] == "too_many_running_commands"
    assert not KbChatMessage.objects.exists()
    assert llm_provider.chat_requests == []


def test_a_model_answer_gives_its_slot_back_once_stored_even_after_a_failure(
    handbook, make_chat, ask, llm_provider, settings
):
    # Given alice, who may run one thing at once, and a model that fails, then answers
    from collab.models import CommandSlot

    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 1
    chat = make_chat(handbook)
    llm_provider.push(HttpError(500, "boom"), Stream(["Close a sandbox [1]."]))

    # When she asks twice in turn
    first, second = ask(chat.id, QUESTION), ask(chat.id, QUESTION)

    # Then both are answered (the first by the quoted fallback) and no slot is left held
    assert (first.status_code, second.status_code) == (201, 201)
    assert second.json()["answer"]["content"] == "Close a sandbox [1]."
    assert not CommandSlot.objects.exists()


def test_a_quoted_answer_takes_no_slot(handbook, make_chat, ask, all_of_alices_slots_taken):
    # Given no model connected, and alice's one slot taken by a command
    chat = make_chat(handbook)

    # When she asks / Then the documents are quoted as ever: quoting holds no thread for long
    response = ask(chat.id, QUESTION)
    assert response.status_code == 201, response.content
    assert response.json()["answer"]["citations"]


def test_another_persons_slots_do_not_limit_her_answers(handbook, make_chat, ask, llm_provider, settings):
    # Given bob's one slot taken, and alice's chat with a model
    from collab.models import CommandSlot

    settings.WORKSPACE_EXEC_CONCURRENCY_PER_USER = 1
    CommandSlot.objects.create(user_id="bob", slot=0, expires_at=clock.now() + timedelta(minutes=5))
    chat = make_chat(handbook)
    llm_provider.push(Stream(["Close a sandbox [1]."]))

    # When alice asks / Then she is answered
    assert ask(chat.id, QUESTION).status_code == 201


@pytest.mark.parametrize(
    ("content", "said"),
    [("quota\x00limits", b"NUL character"), ("[" * 4001, b"4001 characters; at most 4000")],
    ids=["a NUL", "too long"],
)
def test_a_question_the_page_form_sends_with_a_nul_or_too_long_is_refused_before_the_model_is_asked(
    handbook, make_chat, browser_for, llm_provider, content, said
):
    # Given alice's chat over the handbook, answered by the connected model
    chat = make_chat(handbook)
    # When she sends a question with a NUL character in it, or one longer than the API takes,
    # from the chat page's form
    response = browser_for("alice").post(f"/kb/chats/{chat.id}/messages", {"content": content}, follow=True)
    # Then the page says why, nothing is stored, and the model was never asked
    assert said in response.content
    assert not KbChatMessage.objects.exists()
    assert llm_provider.chat_requests == []
