"""The model provider facade against the local OpenAI-compatible test server: what it sends, what it
reads (JSON, streamed chunks, tool calls) and how every failure reads."""

from __future__ import annotations

import json
import logging
from email.utils import format_datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from knowledge.llm import (
    ChatProvider,
    Completion,
    ProviderConfig,
    ProviderError,
    chat_provider,
    check_provider_settings,
)
from tests.fixtures.llm import (
    TEST_API_KEY,
    Call,
    Garbage,
    Hang,
    HttpError,
    RateLimited,
    Reply,
    Stream,
)

QUESTION = [{"role": "user", "content": "Say hello."}]


def _provider() -> ChatProvider:
    provider = chat_provider()
    assert provider is not None
    return provider


def _streamed(provider: ChatProvider, **request) -> tuple[list[str], Completion]:
    events = list(provider.stream(messages=QUESTION, **request))
    *pieces, whole = events
    assert isinstance(whole, Completion)
    return pieces, whole


def _failure(action) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        action()
    return caught.value


def test_a_completion_comes_back_as_text_and_the_request_names_model_key_and_budget(llm_provider):
    # Given a server that answers "Hello."
    llm_provider.push(Reply("Hello."))

    # When the provider is asked
    completion = _provider().complete(messages=QUESTION)

    # Then the text comes back, and the server got the model, the messages, max_tokens and the key
    assert completion == Completion(content="Hello.", tool_calls=(), finish_reason="stop")
    sent = llm_provider.chat_requests[-1]
    assert sent.body["model"] == "test-model"
    assert sent.messages == QUESTION
    assert sent.body["max_tokens"] == 800
    assert sent.headers["authorization"] == f"Bearer {TEST_API_KEY}"


def test_a_streamed_answer_yields_each_piece_then_the_whole(llm_provider):
    # Given a server that streams "Hel", "lo [1]"
    llm_provider.push(Stream(["Hel", "lo [1]"]))

    # When the provider streams the answer
    pieces, whole = _streamed(_provider())

    # Then the pieces come as written, then the whole text, and the request asked for a stream
    assert pieces == ["Hel", "lo [1]"]
    assert whole.content == "Hello [1]"
    assert llm_provider.chat_requests[-1].body["stream"] is True


def test_several_tool_calls_in_one_message_come_back_in_order(llm_provider):
    # Given a server that asks for two tool calls in one message
    calls = [Call("run_command", {"command": "ls"}, id="call_a"), Call("list_files", {}, id="call_b")]
    llm_provider.push(Reply(None, tool_calls=calls))
    tools = [{"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}]

    # When the provider is asked with tools
    completion = _provider().complete(messages=QUESTION, tools=tools)

    # Then both calls come back with their ids and JSON arguments, and the tools were sent
    assert [(call.id, call.name, json.loads(call.arguments)) for call in completion.tool_calls] == [
        ("call_a", "run_command", {"command": "ls"}),
        ("call_b", "list_files", {}),
    ]
    assert completion.finish_reason == "tool_calls"
    assert llm_provider.chat_requests[-1].body["tools"] == tools


def test_streamed_tool_calls_are_assembled_from_their_argument_deltas(llm_provider):
    # Given a server that streams two tool calls, each one's arguments in five pieces
    calls = [Call("write_file", {"path": "a.txt", "text": "hello"}), Call("read_file", {"path": "b.txt"})]
    llm_provider.push(Stream(["Working."], tool_calls=calls, argument_pieces=5))

    # When the provider streams the answer
    pieces, whole = _streamed(_provider(), tools=[{"type": "function", "function": {"name": "write_file"}}])

    # Then the text streams, and the whole holds both calls with their arguments whole
    assert pieces == ["Working."]
    assert [(call.name, json.loads(call.arguments)) for call in whole.tool_calls] == [
        ("write_file", {"path": "a.txt", "text": "hello"}),
        ("read_file", {"path": "b.txt"}),
    ]


def test_a_malformed_tool_call_arguments_text_is_handed_over_as_written(llm_provider):
    # Given a server whose tool call's arguments are not JSON
    llm_provider.push(Reply(None, tool_calls=[Call("run_command", '{"command": "ls"')]))

    # When the provider is asked / Then the text comes back as written, for the caller to refuse
    assert _provider().complete(messages=QUESTION).tool_calls[0].arguments == '{"command": "ls"'


def test_a_server_that_is_down_reads_as_unreachable(settings):
    # Given a provider on a port where nothing listens
    settings.WORKSPACE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.WORKSPACE_LLM_MODEL = "m"

    # When it is asked
    error = _failure(lambda: _provider().complete(messages=QUESTION))

    # Then the failure says so in one sentence
    assert error.kind == "unreachable"
    assert error.reason == "The model server could not be reached."


def test_a_hung_connection_ends_at_the_timeout(llm_provider, settings):
    # Given a server that reads the request and never answers, and a budget of 0.3 s
    settings.WORKSPACE_LLM_TIMEOUT = 0.3
    llm_provider.push(Hang())

    # When the provider is asked
    error = _failure(lambda: _provider().complete(messages=QUESTION))

    # Then it gives up with a timeout that names the budget
    assert error.kind == "timeout"
    assert error.reason == "The model server did not answer within 0.3 seconds."


def test_a_stream_that_hangs_halfway_ends_at_the_timeout(llm_provider, settings):
    # Given a stream that sends a piece, then nothing while keeping the connection open
    settings.WORKSPACE_LLM_TIMEOUT = 0.3
    llm_provider.push(Stream(["Hel"], then="hang"))

    # When the provider streams / Then the piece came, then the timeout
    received = []
    error = _failure(lambda: received.extend(_provider().stream(messages=QUESTION)))
    assert received == ["Hel"]
    assert error.kind == "timeout"


def test_a_stream_slower_than_the_budget_ends_at_the_budget(llm_provider, settings):
    # Given a stream whose pieces come 0.15 s apart, each within the read timeout, and a 0.3 s budget
    settings.WORKSPACE_LLM_TIMEOUT = 0.3
    llm_provider.push(Stream(["a", "b", "c", "d", "e", "f"], delay=0.15))

    # When the provider streams / Then the whole answer never comes: the budget ends it
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    assert error.kind == "timeout"


def test_rate_limiting_reads_with_the_wait_the_server_asks_for(llm_provider):
    # Given a server that answers 429 with Retry-After: 7
    llm_provider.push(RateLimited(7))

    # When the provider is asked
    error = _failure(lambda: _provider().complete(messages=QUESTION))

    # Then the failure says the server is rate-limiting and asks to wait 7 seconds, and carries the wait
    assert error.kind == "rate_limited"
    assert error.retry_after == 7
    assert error.reason == "The model server is rate-limiting requests and asks to wait 7 seconds."
    assert len(llm_provider.chat_requests) == 1  # no retry behind the person's back


def test_a_retry_after_given_as_a_date_is_read_as_seconds(llm_provider):
    # Given a 429 whose Retry-After is a date 60 s ahead
    llm_provider.push(RateLimited(format_datetime(timezone.now() + timezone.timedelta(seconds=60), usegmt=True)))

    # When the provider is asked / Then the wait is about a minute
    error = _failure(lambda: _provider().complete(messages=QUESTION))
    assert 55 <= error.retry_after <= 60


@pytest.mark.parametrize(
    ("status", "kind", "reason"),
    [
        (503, "server_error", "The model server failed (HTTP 503)."),
        (500, "server_error", "The model server failed (HTTP 500)."),
        (401, "refused", "The model server refused the configured API key."),
        (404, "refused", "The model server does not serve the model 'test-model' at the configured address."),
        (400, "refused", "The model server refused the request (HTTP 400)."),
    ],
)
def test_error_statuses_read_as_one_sentence(llm_provider, status, kind, reason):
    # Given a server that answers with an error status
    llm_provider.push(HttpError(status, f"Incorrect API key provided: {TEST_API_KEY}"))

    # When the provider is asked, streamed or not / Then the failure reads as one sentence of ours
    assert (_failure(lambda: _provider().complete(messages=QUESTION)).kind, status) == (kind, status)
    llm_provider.push(HttpError(status))
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    assert (error.kind, error.reason) == (kind, reason)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>Bad gateway</html>",
        b'{"id": "x", "choices": []}',
        b'{"unexpected": true}',
        b'{"choices": [{"message": "not an object"}]}',
    ],
)
def test_an_answer_that_is_not_a_completion_reads_as_invalid(llm_provider, body):
    # Given a server that answers 200 with something that is not a chat completion
    llm_provider.push(Garbage(body))

    # When the provider is asked / Then it is an invalid answer, said in one sentence
    error = _failure(lambda: _provider().complete(messages=QUESTION))
    assert error.kind == "invalid"
    assert error.reason.startswith("The model server ")


@pytest.mark.parametrize("end", ["cut", "garbage"])
def test_a_stream_cut_short_or_turning_to_garbage_reads_as_invalid(llm_provider, end):
    # Given a stream that sends a piece, then closes without finishing, or sends a line that is not JSON
    llm_provider.push(Stream(["Hel"], then=end))

    # When the provider streams / Then the piece came, then an invalid-answer failure
    received = []
    error = _failure(lambda: received.extend(_provider().stream(messages=QUESTION)))
    assert received == ["Hel"]
    assert error.kind == "invalid"


def test_a_body_that_is_not_a_stream_when_one_was_asked_reads_as_invalid(llm_provider):
    # Given a server that answers a stream request with an HTML page
    llm_provider.push(Garbage(b"<html>proxy login</html>", content_type="text/html"))

    # When the provider streams / Then it is an invalid answer
    assert _failure(lambda: list(_provider().stream(messages=QUESTION))).kind == "invalid"


def test_the_key_is_never_logged_shown_or_in_a_reason(llm_provider, caplog):
    # Given every logger at DEBUG, and a server that answers, then echoes the key in a 401
    caplog.set_level(logging.DEBUG)
    llm_provider.push(Reply("Hello."), Stream(["Hi"]), HttpError(401, f"Incorrect API key provided: {TEST_API_KEY}"))
    provider = _provider()

    # When the provider answers twice, then fails
    provider.complete(messages=QUESTION)
    list(provider.stream(messages=QUESTION))
    error = _failure(lambda: provider.complete(messages=QUESTION))

    # Then the key is in no log record, no repr and no reason, yet the server got it each time
    assert caplog.records
    assert all(TEST_API_KEY not in record.getMessage() for record in caplog.records)
    assert TEST_API_KEY not in repr(provider)
    assert TEST_API_KEY not in repr(provider.config)
    assert TEST_API_KEY not in f"{error} {error.reason} {error!r}"
    assert [request.headers["authorization"] for request in llm_provider.chat_requests] == [
        f"Bearer {TEST_API_KEY}"
    ] * 3


def test_a_server_without_a_key_gets_a_placeholder_not_another_key(llm_provider, settings, monkeypatch):
    # Given no key configured, and an OPENAI_API_KEY in the environment meant for something else
    settings.WORKSPACE_LLM_API_KEY = ""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-someone-elses")

    # When the provider is asked
    _provider().complete(messages=QUESTION)

    # Then the server never sees the environment's key
    assert llm_provider.chat_requests[-1].headers["authorization"] == "Bearer no-key"


def test_no_base_url_means_no_provider(settings):
    # Given no model provider configured / When the provider is looked up / Then there is none
    settings.WORKSPACE_LLM_BASE_URL = ""
    assert chat_provider() is None


def test_the_model_answerer_without_a_provider_is_refused_at_start_up(settings):
    # Given the model answerer chosen by name and no provider
    settings.KNOWLEDGE_ANSWERER, settings.WORKSPACE_LLM_BASE_URL = "knowledge.model_answers.ModelAnswerer", ""

    # When the settings are checked / Then start-up fails naming the missing setting
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_LLM_BASE_URL must name a provider"):
        check_provider_settings()


@pytest.mark.parametrize(
    ("base_url", "model", "complaint"),
    [
        ("http://127.0.0.1:11434/v1", "", "WORKSPACE_LLM_MODEL must name the model"),
        ("127.0.0.1:11434", "llama3", "must be an http:// or https:// URL"),
    ],
)
def test_a_provider_named_by_halves_is_refused_at_start_up(settings, base_url, model, complaint):
    # Given a base URL without a model, or a URL without a scheme
    settings.WORKSPACE_LLM_BASE_URL, settings.WORKSPACE_LLM_MODEL = base_url, model

    # When the settings are checked / Then start-up fails naming the setting
    with pytest.raises(ImproperlyConfigured, match=complaint):
        check_provider_settings()


def test_the_embeddings_endpoint_speaks_the_wire_protocol(llm_server):
    # Given the official client pointed at the test server
    import openai

    client = openai.OpenAI(base_url=llm_server.base_url, api_key=TEST_API_KEY, max_retries=0)

    # When two texts are embedded
    result = client.embeddings.create(model="test-embed", input=["database backups", "database backups"])

    # Then each gets a unit vector of the fixed size, the same text the same vector
    first, second = (item.embedding for item in result.data)
    assert len(first) == 64
    assert first == second
    assert abs(sum(value * value for value in first) - 1.0) < 1e-9


def test_a_test_sets_its_own_embedding_function(llm_server):
    # Given a test server embedding every text as [1, 0]
    import openai

    llm_server.embed = lambda text: [1.0, 0.0]

    # When a text is embedded / Then its vector is that one
    client = openai.OpenAI(base_url=llm_server.base_url, api_key=TEST_API_KEY, max_retries=0)
    assert client.embeddings.create(model="m", input="x").data[0].embedding == [1.0, 0.0]


def test_provider_config_repr_leaves_the_key_out():
    # Given a config with a key / When it is shown / Then the key is not
    assert "sk-secret" not in repr(ProviderConfig(base_url="http://x/v1", model="m", api_key="sk-secret"))


def test_any_provider_answers_a_plain_question(any_provider):
    # Given the test server, or the real server WORKSPACE_LLM_TEST_BASE_URL names
    # When the provider is asked a short question
    completion = _provider().complete(messages=QUESTION, max_tokens=20)

    # Then some text comes back and no tool was called
    assert completion.content.strip()
    assert completion.tool_calls == ()


def test_any_provider_streams_pieces_that_make_up_the_whole(any_provider):
    # Given the test server, or the real server WORKSPACE_LLM_TEST_BASE_URL names
    # When the provider streams a short answer
    pieces, whole = _streamed(_provider(), max_tokens=20)

    # Then the pieces, joined, are the whole text
    assert pieces
    assert "".join(pieces) == whole.content
