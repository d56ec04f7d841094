"""Every pattern and parser that ingest or rendering runs on user text is linear.

The attack: knowledge ingest's Markdown link pattern `!?\\[([^\\]]*)\\]\\([^)]*\\)` took 5.2 s on 40,000
`[` characters (about 30 s at 10^5), and a 150 KB .md held the only worker for 85 s. Each pattern
below that reads user text (documents, questions, answers, agent messages, size and duration
strings) gets 10^5-character inputs built against it, and each run must stay within a budget of CPU
time: a quadratic pattern takes tens of seconds there, a linear one milliseconds. The Markdown
parser (markdown-it-py, for ingest and for chat messages) is linear but does more per character
(up to about 2 s here), so it has a budget of its own. File globs are the exception: fnmatch is
quadratic in `[`, so the file batch bounds their length instead. CPU time, not wall-clock time: the
machine running the tests may be busy.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable

import pytest

from knowledge.answers import Answer, best_sentences
from knowledge.chunking import chunk_blocks
from knowledge.formats import markdown_blocks, text_blocks
from knowledge.markup import CitationPreview, link_allowed, message_html
from knowledge.search import search_terms
from quotas.sizes import SizeError, parse_duration_seconds, parse_size
from workspace.agent.deterministic import _parse as agent_parse
from workspace.sandboxes.filebatch import MAX_GLOB_CHARS
from workspace.workflows.forms import _AMOUNT

N = 100_000
PATTERN_BUDGET_SECONDS = 1.0
PARSER_BUDGET_SECONDS = 10.0

# Runs of one character or pair, and near-misses of each pattern's shape, at 10^5 characters.
RUNS = {
    name: text[:N]
    for name, text in {
        "brackets": "[" * N,
        "image brackets": "![" * N,
        "closing brackets": "]" * N,
        "link openers": "[a](" * N,
        "empty links": "[](" * N,
        "nested brackets": "[" * (N // 2) + "]" * (N // 2),
        "nested links": "[" * (N // 5) + "a" + "](x)" * (N // 5),
        "nested images": "![" * (N // 6) + "a" + "](x)" * (N // 6),
        "bracket parens": "[(" * N,
        "reference definitions": "[" * (N - 5) + "]: x",
        "stars": "*" * N,
        "star words": "*a" * N,
        "mixed emphasis": "**_" * N,
        "underscores": "_" * N,
        "backticks": "`" * N,
        "backtick words": "`a" * N,
        "angle brackets": "<a" * N,
        "autolinks": "<http://" * N,
        "entities": "&#" * N,
        "backslashes": "\\" * N,
        "hashes": "#" * N,
        "quote markers": "> " * N,
        "list markers": "- " * N,
        "pipes": "|" * N,
        "table rows": "|a|\n|-|\n" + "|x|\n" * N,
        "setext lines": "a\n=\n" * N,
        "short lines": "a\n\n" * N,
        "short lines and sentences": "a\n\nb.\n\n" * N,
        "a long heading over many paragraphs": "# " + "a" * (N // 2) + "\n\n" + "x\n\n" * N,
        "fences": "```\n" * N,
        "spaces after a newline": "\n" + " " * N,
        "blank-line lookalikes": "\n \r" * N,
        "sentence ends": ". " * N,
        "dots": "." * N,
        "markers": "[1]" * N,
        "unclosed markers": "[1" * N,
        "digits": "1" * N,
        "numbered lines": "123456789. x\n" * N,
        "underscored words": "a_" * N,
        "control characters": "\x00\x1f" * N,
    }.items()
}


def _within(budget: float, work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    spent = time.process_time() - start
    assert spent < budget, f"took {spent:.2f} s of CPU, over the budget of {budget} s"
    return spent


def _ingest(text: str) -> None:
    chunk_blocks(markdown_blocks(text), max_chunks=N * 10)
    chunk_blocks(text_blocks(text), max_chunks=N * 10)


@pytest.mark.parametrize("name", RUNS)
def test_ingest_reads_hostile_markdown_and_text_within_the_parser_budget(name):
    # Given 10^5 characters built against the Markdown grammar and the plain-text rules
    # When ingest reads them as Markdown and as plain text, and chunks them
    # Then it finishes within the budget
    _within(PARSER_BUDGET_SECONDS, lambda: _ingest(RUNS[name]))


@pytest.mark.parametrize("name", RUNS)
def test_a_hostile_chat_message_renders_within_the_parser_budget(name):
    # Given 10^5 hostile characters as a chat message with a preview for marker [1]
    previews = {1: CitationPreview(source="[1] a.md, chunk 1:", text="x")}

    # When it is rendered / Then it finishes within the budget
    _within(PARSER_BUDGET_SECONDS, lambda: message_html(RUNS[name], message_id="msg_1", previews=previews))


@pytest.mark.parametrize("name", RUNS)
def test_answer_patterns_read_hostile_passages_within_the_budget(name):
    # Given 10^5 hostile characters as a retrieved passage and as an answer's text
    text = RUNS[name]

    # When quotes are picked from it, its words taken as search terms, and its markers checked
    # Then each finishes within the budget
    _within(PATTERN_BUDGET_SECONDS, lambda: best_sentences(text, ["backup", "kept"]))
    _within(PATTERN_BUDGET_SECONDS, lambda: search_terms(text))
    _within(PATTERN_BUDGET_SECONDS, lambda: Answer(text=text, citations=()).persisted_citations())


@pytest.mark.parametrize("name", RUNS)
def test_link_checks_read_hostile_urls_within_the_budget(name):
    # Given 10^5 hostile characters as a link target, with and without a scheme-like ending
    # When the renderer checks whether it may link there / Then it finishes within the budget
    _within(PATTERN_BUDGET_SECONDS, lambda: (link_allowed(RUNS[name]), link_allowed(RUNS[name] + ":")))


@pytest.mark.parametrize(
    "message",
    [
        "@mention a" + " " * N + "b",
        "@mention " + "a " * (N // 2) + ":",
        "@status x" + " " * N + "y",
        "```sh" + " " * N,
        "```\n" + "x" * N,
        "```" * (N // 3),
        "$ " + " " * N,
        "@mention" + "\t" * N,
    ],
    ids=["mention spaces", "mention words", "status spaces", "fence spaces", "open fence", "fences", "dollar", "tabs"],
)
def test_the_agent_reads_a_hostile_message_within_the_budget(message):
    # Given 10^5 characters built against the agent's fence, mention and status patterns
    # When the deterministic agent parses the message / Then it finishes within the budget
    _within(PATTERN_BUDGET_SECONDS, lambda: agent_parse(message))


def test_a_mention_still_reads_its_users_and_note():
    # Given a mention with spaces before its colon
    # When the agent parses it
    actions, _ = agent_parse("@mention bob carol   : please look")

    # Then the users are read without the trailing spaces, and the note after the colon
    assert [(action.kind, action.text, action.extra) for action in actions] == [("mention", "bob carol", "please look")]


@pytest.mark.parametrize(
    "value", ["1" + " " * N + "x", " " * N + "1" + " " * N + "x", "1" * N + "x", "1." + "1" * N + "x"]
)
def test_size_and_duration_strings_are_refused_within_the_budget(value):
    # Given a hostile size or duration string (staff overrides and app descriptors are parsed with these)
    # When it is parsed as a size and as a duration / Then each is refused within the budget
    def parse_both() -> None:
        for parse in (parse_size, parse_duration_seconds):
            with pytest.raises(SizeError):
                parse(value)

    _within(PATTERN_BUDGET_SECONDS, parse_both)


def test_sizes_and_durations_with_spaces_still_parse():
    # Given sizes and durations with spaces around and inside them
    # When they are parsed / Then they read as before
    assert parse_size(" 512 MiB ") == 512 * 1024**2
    assert parse_duration_seconds(" 1.5 h\n") == 5400


def test_a_workflow_amount_is_checked_within_the_budget():
    # Given a hostile schedule amount / When it is checked / Then it is refused within the budget
    _within(PATTERN_BUDGET_SECONDS, lambda: _AMOUNT.fullmatch("1" * N + ".1"))


@pytest.mark.parametrize("pattern", ["*a", "*", "[", "[!", "[a", "?*", "[]"])
def test_the_longest_hostile_file_glob_matches_within_the_budget(pattern):
    # Given the longest glob a file batch accepts (fnmatch's translation is quadratic in `[`, so
    # the batch refuses longer ones: tests/items/test_files.py), made of one hostile piece, and a
    # path as long as a path may be
    glob = (pattern * MAX_GLOB_CHARS)[:MAX_GLOB_CHARS]

    # When the file batch's replace matches it / Then it finishes within the budget
    _within(PATTERN_BUDGET_SECONDS, lambda: fnmatch.fnmatch("a" * 4096, glob))
