"""What a hostile model server can make the provider do: nothing past its deadline and its byte caps
(knowledge/llm_bounds.py), whatever it sends. Against the local test server, over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from knowledge.llm import ChatProvider, ProviderError, chat_provider
from knowledge.llm_bounds import BoundedTransport, ModelServerRefused, ResponseBounds, _lines
from tests.fixtures.llm import Call, Endless, Stream

QUESTION = [{"role": "user", "content": "Say hello."}]


def _provider() -> ChatProvider:
    provider = chat_provider()
    assert provider is not None
    return provider


def _failure(action) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        action()
    return caught.value


def test_a_line_that_never_ends_is_cut_off_at_the_line_cap(llm_provider, settings):
    # Given a server that sends `data: ` and then 64 KiB of A again and again, never a newline
    settings.WORKSPACE_LLM_TIMEOUT = 30.0
    settings.WORKSPACE_LLM_MAX_LINE_BYTES = 256 * 1024
    llm_provider.push(Endless("line"))
    # When the provider streams its answer
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    # Then it stops at the cap on one line, long before its deadline, and says so
    assert error.kind == "too_large"
    assert error.reason == "The model server sent a line of more than 262,144 bytes."


def test_a_line_that_never_ends_is_cut_off_at_the_deadline_when_the_caps_are_high(llm_provider, settings):
    # Given caps no server reaches in a second, a 0.5 s budget, and the same endless line
    settings.WORKSPACE_LLM_TIMEOUT = 0.5
    settings.WORKSPACE_LLM_MAX_LINE_BYTES = 10**12
    settings.WORKSPACE_LLM_MAX_RESPONSE_BYTES = 10**12
    llm_provider.push(Endless("line"))
    # When the provider streams / Then the deadline over the raw bytes ends it: no event was ever parsed
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    assert error.kind == "timeout"
    assert error.reason == "The model server did not answer within 0.5 seconds."


def test_a_line_trickled_a_byte_at_a_time_ends_at_the_deadline(llm_provider, settings):
    # Given a server that sends one byte of an endless line every 0.1 s (each read well within the
    # read timeout), and a 0.5 s budget
    settings.WORKSPACE_LLM_TIMEOUT = 0.5
    llm_provider.push(Endless("line", block_bytes=1, interval=0.1))
    # When the provider streams / Then the deadline ends it
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    assert error.kind == "timeout"


def test_a_server_silent_after_its_headers_ends_at_the_deadline_in_the_middle_of_a_read(llm_provider, settings):
    # Given a stream that sends its first piece, then nothing, with the read timeout (the budget)
    # long and the deadline of the whole answer short: only the watchdog can end the blocked read
    settings.WORKSPACE_LLM_TIMEOUT = 0.5
    llm_provider.push(Stream(["Hel"], then="hang"))
    provider = _provider()
    # When the provider streams
    received: list[str] = []
    error = _failure(lambda: received.extend(event for event in provider.stream(messages=QUESTION)))
    # Then the piece came, then the timeout
    assert received == ["Hel"]
    assert error.kind == "timeout"


def test_well_formed_chunks_that_never_finish_are_cut_off_at_the_response_cap(llm_provider, settings):
    # Given a server that streams valid text chunks forever, and a response cap of 1 MiB
    settings.WORKSPACE_LLM_TIMEOUT = 30.0
    settings.WORKSPACE_LLM_MAX_RESPONSE_BYTES = 1024 * 1024
    llm_provider.push(Endless("chunks"))
    # When the provider streams
    pieces: list[str] = []
    error = _failure(lambda: pieces.extend(event for event in _provider().stream(messages=QUESTION)))
    # Then some text came, and then the cap on the whole answer stopped it
    assert pieces
    assert error.kind == "too_large"
    assert error.reason == "The model server sent more than 1,048,576 bytes in one answer."


def test_a_gigabyte_body_is_cut_off_at_the_line_cap_without_being_read_whole(llm_provider, settings):
    # Given a server that answers a plain completion with Content-Length 1 GB of one line
    settings.WORKSPACE_LLM_TIMEOUT = 30.0
    llm_provider.push(Endless("body"))
    # When the provider asks for the whole answer at once
    error = _failure(lambda: _provider().complete(messages=QUESTION))
    # Then it stops at the cap on one line (1 MiB by default)
    assert error.kind == "too_large"
    assert error.reason == "The model server sent a line of more than 1,048,576 bytes."


def test_tool_call_arguments_past_their_cap_end_the_answer(llm_provider, settings):
    # Given a stream whose tool call carries 10,000 bytes of arguments, and a cap of 4,096
    settings.WORKSPACE_LLM_MAX_TOOL_ARGUMENT_BYTES = 4096
    llm_provider.push(Stream(tool_calls=[Call("run_command", {"command": "x" * 10_000})], argument_pieces=10))
    # When the provider streams / Then the call is refused as too large, naming the cap
    error = _failure(lambda: list(_provider().stream(messages=QUESTION)))
    assert error.kind == "too_large"
    assert error.reason == "The model asked for a tool call with more than 4,096 bytes of arguments."


def test_an_answer_within_every_bound_comes_through_whole(llm_provider, settings):
    # Given tight but sufficient caps and a normal streamed answer
    settings.WORKSPACE_LLM_MAX_LINE_BYTES = 4096
    settings.WORKSPACE_LLM_MAX_RESPONSE_BYTES = 64 * 1024
    llm_provider.push(Stream(["Hel", "lo"]))
    # When the provider streams / Then every piece and the whole answer arrive
    *pieces, whole = list(_provider().stream(messages=QUESTION))
    assert pieces == ["Hel", "lo"]
    assert whole.content == "Hello"


@pytest.mark.parametrize(
    ("chunk", "carried", "open_line", "longest"),
    [
        (b"abc", 5, 8, 8),
        (b"ab\ncd", 5, 2, 7),
        (b"a\n" + b"x" * 50 + b"\nb", 0, 1, 50),
        (b"\n\n", 9, 0, 9),
    ],
)
def test_the_longest_line_is_measured_across_and_inside_chunks(chunk, carried, open_line, longest):
    # Given a chunk, the bytes of its first line that came before, and a cap below the chunk's size
    # When its lines are measured / Then the line it leaves open and the longest it touches are known
    assert _lines(chunk, carried, limit=10) == (open_line, longest)


def test_a_read_blocked_past_the_deadline_is_ended_by_the_watchdog_not_the_read_timeout(llm_server):
    # Given the bounded transport with a 0.5 s deadline under a client whose read timeout is 30 s,
    # and a stream that sends its first piece and then nothing while keeping the connection open
    llm_server.push(Stream(["Hel"], then="hang"))
    bounds = ResponseBounds(seconds=0.5, line_bytes=1024 * 1024, response_bytes=1024 * 1024)
    client = httpx.Client(transport=BoundedTransport(bounds), timeout=30.0)
    # When the stream is read
    with (
        pytest.raises(ModelServerRefused) as caught,
        client.stream("POST", f"{llm_server.base_url}/chat/completions", json={}) as response,
    ):
        for _chunk in response.iter_bytes():
            pass
    # Then the blocked read ended as the deadline passed (its socket shut down), as a timeout
    assert caught.value.kind == "timeout"
