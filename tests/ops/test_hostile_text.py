"""Every pattern and parser that ingest or rendering runs on user text reads hostile text through.

The attack: knowledge ingest's Markdown link pattern `!?\\[([^\\]]*)\\]\\([^)]*\\)` took 5.2 s on 40,000
`[` characters (about 30 s at 10^5), and a 150 KB .md held the only worker for 85 s. Each pattern
below that reads user text (documents, questions, answers, agent messages, size and duration
strings) gets inputs of N characters built against it, through the public function that runs it,
and each call must return with what it owes for that text: chunks within the chunk size, HTML
and quotes no larger than the text allows, the refusal of what cannot be read. A quadratic pattern
takes seconds on each of these inputs, which the suite's durations show; how long each
takes is measured in bench/, never asserted here (a test asserts behaviour, not time). File
globs are the exception: fnmatch is quadratic in `[`, so the file batch bounds their length
instead (tests/items/test_files.py), and the longest it accepts is read here.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import pytest

from knowledge.answers import Answer, best_sentences
from knowledge.chunking import CHUNK_MAX_CHARS, ChunkText, chunk_blocks
from knowledge.formats import markdown_blocks, text_blocks
from knowledge.markup import CitationPreview, link_allowed, message_html
from knowledge.search import search_terms
from quotas.sizes import SizeError, parse_duration_seconds, parse_size
from workspace.agent.deterministic import HELP, DeterministicAgent
from workspace.agent.protocol import AgentTurn
from workspace.sandboxes.base import ExecResult
from workspace.sandboxes.filebatch import MAX_GLOB_CHARS
from workspace.workflows.forms import FormProblem, WorkflowForm

# Large enough that a quadratic pattern takes seconds (the Markdown link pattern of the attack: about
# 3 s at this size), small enough that the linear ones cost the suite little.
N = 30_000


def hostile_runs(n: int) -> dict[str, str]:
    """Runs of one character or pair, and near-misses of each pattern's shape, at `n` characters
    (bench/hostile_text.py times them at 10^5)."""
    return {
        name: text[:n]
        for name, text in {
            "brackets": "[" * n,
            "image brackets": "![" * n,
            "closing brackets": "]" * n,
            "link openers": "[a](" * n,
            "empty links": "[](" * n,
            "nested brackets": "[" * (n // 2) + "]" * (n // 2),
            "nested links": "[" * (n // 5) + "a" + "](x)" * (n // 5),
            "nested images": "![" * (n // 6) + "a" + "](x)" * (n // 6),
            "bracket parens": "[(" * n,
            "reference definitions": "[" * (n - 5) + "]: x",
            "stars": "*" * n,
            "star words": "*a" * n,
            "mixed emphasis": "**_" * n,
            "underscores": "_" * n,
            "backticks": "`" * n,
            "backtick words": "`a" * n,
            "angle brackets": "<a" * n,
            "autolinks": "<http://" * n,
            "entities": "&#" * n,
            "backslashes": "\\" * n,
            "hashes": "#" * n,
            "quote markers": "> " * n,
            "list markers": "- " * n,
            "pipes": "|" * n,
            "table rows": "|a|\n|-|\n" + "|x|\n" * n,
            "setext lines": "a\n=\n" * n,
            "short lines": "a\n\n" * n,
            "short lines and sentences": "a\n\nb.\n\n" * n,
            "a long heading over many paragraphs": "# " + "a" * (n // 2) + "\n\n" + "x\n\n" * n,
            "fences": "```\n" * n,
            "spaces after a newline": "\n" + " " * n,
            "blank-line lookalikes": "\n \r" * n,
            "sentence ends": ". " * n,
            "dots": "." * n,
            "markers": "[1]" * n,
            "unclosed markers": "[1" * n,
            "digits": "1" * n,
            "numbered lines": "123456789. x\n" * n,
            "underscored words": "a_" * n,
            "control characters": "\x00\x1f" * n,
        }.items()
    }


RUNS = hostile_runs(N)


@pytest.mark.parametrize("name", RUNS)
def test_ingest_reads_hostile_markdown_and_text_into_chunks_within_the_chunk_size(name):
    # Given N characters built against the Markdown grammar and the plain-text rules
    text = RUNS[name]

    # When ingest reads them as Markdown and as plain text, and chunks them
    chunks = [
        *chunk_blocks(markdown_blocks(text), max_chunks=N * 10),
        *chunk_blocks(text_blocks(text), max_chunks=N * 10),
    ]

    # Then it returns chunks, none longer than a chunk may be
    assert all(isinstance(chunk, ChunkText) and len(chunk.text) <= CHUNK_MAX_CHARS for chunk in chunks)


@pytest.mark.parametrize("name", RUNS)
def test_a_hostile_chat_message_renders_into_html_that_grows_with_it_no_faster(name):
    # Given N hostile characters as a chat message with a preview for marker [1]
    previews = {1: CitationPreview(source="[1] a.md, chunk 1:", text="x")}

    # When it is rendered
    html = message_html(RUNS[name], message_id="msg_1", previews=previews)

    # Then the HTML grows with the message, no faster: each character takes at most what a
    # whole marker with its preview (the largest rendering of a piece of text) takes
    one_marker = message_html("[1]", message_id="msg_1", previews=previews)
    assert len(html) <= len(one_marker) * len(RUNS[name])


@pytest.mark.parametrize("name", RUNS)
def test_answer_patterns_read_hostile_passages_into_quotes_terms_and_markers_of_their_own(name):
    # Given N hostile characters as a retrieved passage and as an answer's text
    text = RUNS[name]

    # When quotes are picked from it, its words taken as search terms, and its markers checked
    quote = best_sentences(text, ["backup", "kept"])
    terms = search_terms(text)
    citations = Answer(text=text, citations=()).persisted_citations()

    # Then the quote is no longer than the passage, every term is a word of it, and no marker
    # counts without a source
    assert len(quote) <= len(text)
    assert all(term in text.lower() for term in terms)
    assert citations == []


@pytest.mark.parametrize("name", RUNS)
def test_link_checks_read_hostile_urls_and_still_refuse_a_script_scheme(name):
    # Given N hostile characters as a link target, with a scheme-like ending, and after a
    # `javascript:` scheme
    text = RUNS[name]

    # When the renderer checks whether it may link there
    decisions = [link_allowed(text), link_allowed(text + ":"), link_allowed("javascript:" + text)]

    # Then it decides each, and never links to the script
    assert [type(decision) for decision in decisions] == [bool, bool, bool]
    assert decisions[2] is False


@dataclass
class _RecordingTools:
    """The deterministic agent's tools, recording each call."""

    calls: list[tuple] = field(default_factory=list)

    def run_command(self, command: str) -> ExecResult:
        self.calls.append(("run", command))
        return ExecResult(exit_code=0, stdout="", stderr="")

    def ask_knowledge(self, question: str) -> Answer:
        self.calls.append(("ask", question))
        return Answer(text="", citations=())

    def mention_user(self, user_ids: list[str], note: str = "") -> None:
        self.calls.append(("mention", tuple(user_ids), note))

    def set_status(self, status: str) -> None:
        self.calls.append(("status", status))


def _agent_reads(message: str) -> tuple[list[str], list[tuple]]:
    """The deterministic agent's replies to `message` as a turn in an investigation, and the tools it called."""
    tools = _RecordingTools()
    turn = AgentTurn(item_id=1, app_slug="rca", user_id="alice", content=message, in_investigation=True)
    return [reply.content for reply in DeterministicAgent().respond(turn, tools)], tools.calls


@pytest.mark.parametrize(
    ("message", "calls"),
    [
        ("@mention a" + " " * N + "b", [("mention", ("a", "b"), "")]),
        ("@mention " + "a " * (N // 2) + ":", [("mention", ("a",) * (N // 2), "")]),
        ("@status x" + " " * N + "y", []),
        ("```sh" + " " * N, []),
        ("```\n" + "x" * N, []),
        ("```" * (N // 3), []),
        ("$ " + " " * N, []),
        ("@mention" + "\t" * N, []),
    ],
    ids=["mention spaces", "mention words", "status spaces", "fence spaces", "open fence", "fences", "dollar", "tabs"],
)
def test_the_agent_reads_a_hostile_message_and_does_only_what_it_spells_out(message, calls):
    # Given N characters built against the agent's fence, mention and status patterns
    # When the deterministic agent answers the message
    replies, called = _agent_reads(message)

    # Then it calls only the tools the message spells out, and otherwise says what it can do
    assert called == calls
    assert replies == ([HELP] if not calls else replies)
    assert replies


def test_a_mention_still_reads_its_users_and_note():
    # Given a mention with spaces before its colon
    # When the agent answers it
    _, called = _agent_reads("@mention bob carol   : please look")

    # Then the users are read without the trailing spaces, and the note after the colon
    assert called == [("mention", ("bob", "carol"), "please look")]


@pytest.mark.parametrize(
    "value", ["1" + " " * N + "x", " " * N + "1" + " " * N + "x", "1" * N + "x", "1." + "1" * N + "x"]
)
def test_hostile_size_and_duration_strings_are_refused(value):
    # Given a hostile size or duration string (staff overrides and app descriptors are parsed with these)
    # When it is parsed as a size and as a duration / Then each is refused
    for parse in (parse_size, parse_duration_seconds):
        with pytest.raises(SizeError):
            parse(value)


def test_sizes_and_durations_with_spaces_still_parse():
    # Given sizes and durations with spaces around and inside them
    # When they are parsed / Then they read as before
    assert parse_size(" 512 MiB ") == 512 * 1024**2
    assert parse_duration_seconds(" 1.5 h\n") == 5400


def test_a_hostile_workflow_amount_is_refused_as_not_a_number():
    # Given a workflow form whose schedule amount is N digits and a fraction
    form = WorkflowForm(name="nightly", steps=("true",), every="1" * N + ".1", every_unit="hours")

    # When the form is read / Then the amount is refused as not a number
    with pytest.raises(FormProblem) as problem:
        form.data()
    assert problem.value.fields == {"every_seconds": "must be a number, such as 30 or 1.5"}


@pytest.mark.parametrize(
    ("pattern", "matches"),
    [("*a", True), ("*", True), ("[", False), ("[!", False), ("[a", False), ("?*", True), ("[]", False)],
)
def test_the_longest_hostile_file_glob_is_matched(pattern, matches):
    # Given the longest glob a file batch accepts (fnmatch's translation is quadratic in `[`, so
    # the batch refuses longer ones: tests/items/test_files.py), made of one hostile piece, and a
    # path as long as a path may be
    glob = (pattern * MAX_GLOB_CHARS)[:MAX_GLOB_CHARS]

    # When the file batch's replace matches it / Then it decides, as the glob says
    assert fnmatch.fnmatch("a" * 4096, glob) is matches
