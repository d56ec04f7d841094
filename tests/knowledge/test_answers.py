"""The extractive answerer: quoted passages, numbered markers, merged neighbours, honest misses."""

from __future__ import annotations

import pytest

from knowledge.answers import (
    NOTHING_FOUND,
    Answer,
    Citation,
    ExtractiveAnswerer,
    Passage,
    answer_question,
    best_sentences,
    retrieve_passages,
)
from knowledge.models import Chunk

pytestmark = pytest.mark.django_db

PARAGRAPH = "Filler sentence about the weather and lunch plans for the team. " * 10


def test_answer_quotes_passages_and_numbers_them(handbook):
    answer = answer_question(question="How do I free capacity when a quota limit is hit?", collection_ids=[handbook.id])

    assert answer.citations
    assert [citation.marker for citation in answer.citations] == list(range(1, len(answer.citations) + 1))
    first = answer.citations[0]
    assert first.document_name == "quotas.md"
    assert f"{first.quote} [1]" in answer.text
    assert "my-resources screen" in first.quote


def test_adjacent_chunks_of_one_document_merge_into_one_marker(make_collection, upload):
    collection = make_collection()
    text = f"{PARAGRAPH}\n\nZebra crossings one.\n\nZebra crossings two.\n\n{PARAGRAPH}"
    upload(collection.id, "zebra.txt", text)
    zebra_chunks = [c.id for c in Chunk.objects.order_by("ordinal") if "Zebra" in c.text]

    answer = answer_question(question="zebra crossings", collection_ids=[collection.id])

    assert len(answer.citations) == 1
    assert set(answer.citations[0].source_chunk_ids) == set(zebra_chunks)


def test_chunks_that_are_not_adjacent_get_separate_markers(make_collection, upload):
    collection = make_collection()
    text = f"Zebra crossings one. {PARAGRAPH}\n\n{PARAGRAPH}\n\nZebra crossings two. {PARAGRAPH}"
    upload(collection.id, "zebra.txt", text)

    answer = answer_question(question="zebra", collection_ids=[collection.id])

    assert [len(citation.source_chunk_ids) for citation in answer.citations] == [1, 1]
    assert "[1]" in answer.text
    assert "[2]" in answer.text


def test_answer_that_finds_nothing_says_so_and_cites_nothing(handbook):
    received = []

    answer = answer_question(
        question="kubernetes helm charts", collection_ids=[handbook.id], on_citations=received.append
    )

    assert answer.text == NOTHING_FOUND
    assert answer.citations == ()
    assert received == [[]]


def test_on_citations_receives_the_markers_that_count(handbook):
    received = []

    answer = answer_question(question="share chat readers", collection_ids=[handbook.id], on_citations=received.append)

    assert received == [list(answer.citations)]


def test_markers_out_of_range_are_ignored_when_persisting():
    cited = Citation(1, "col", "doc", "a.txt", ("chk_1",))
    stray = Citation(9, "col", "doc", "a.txt", ("chk_2",))
    answer = Answer(text="See [1], and [3] and [9].", citations=(cited, stray))

    assert answer.persisted_citations() == [cited]


def test_citations_never_named_in_the_text_are_not_persisted():
    first = Citation(1, "col", "doc", "a.txt", ("chk_1",))
    second = Citation(2, "col", "doc", "a.txt", ("chk_2",))

    assert Answer(text="Only [2] is used.", citations=(first, second)).persisted_citations() == [second]


def test_another_answerer_plugs_in_behind_the_same_interface(handbook, settings):
    class EchoAnswerer:
        def answer(self, *, question: str, passages: list[Passage]) -> Answer:
            return Answer(text=f"{len(passages)} passages for {question}", citations=())

    answer = answer_question(question="quota", collection_ids=[handbook.id], answerer=EchoAnswerer())

    assert answer.text == "1 passages for quota"


def test_extractive_answerer_quotes_at_most_three_passages():
    passages = [Passage("col", f"doc{n}", "a.txt", (f"chk{n}",), f"text {n}", 1.0) for n in range(5)]

    answer = ExtractiveAnswerer().answer(question="q", passages=passages)

    assert [citation.marker for citation in answer.citations] == [1, 2, 3]


def test_retrieval_skips_chunks_the_index_names_but_no_longer_exist(handbook):
    Chunk.objects.filter(document__filename="sharing.md").delete()

    passages = retrieve_passages(question="share chat readers", collection_ids=[handbook.id])

    assert all(passage.document_name != "sharing.md" for passage in passages)


def test_a_bracketed_number_inside_a_source_cannot_pass_for_a_marker(make_collection, upload):
    collection = make_collection()
    upload(collection.id, "refs.txt", "Zebra crossings are explained in reference [7] of the manual.")

    answer = answer_question(question="zebra crossings", collection_ids=[collection.id])

    assert "[7]" not in answer.text
    assert "reference (7)" in answer.text
    assert [citation.marker for citation in answer.persisted_citations()] == [1]


def test_quotes_keep_the_sentences_that_share_words_with_the_question():
    text = "Lunch is at noon. Close a sandbox to free capacity. The weather is fine. Parking is free."

    assert best_sentences(text, ["close", "sandbox"]) == "Close a sandbox to free capacity."
