"""The extractive answerer: quoted passages, numbered markers, merged neighbours, honest misses."""

from __future__ import annotations

import pytest

from knowledge.answers import (
    NOTHING_FOUND,
    Answer,
    Citation,
    ExtractiveAnswerer,
    Passage,
    about_the_question,
    answer_question,
    best_sentences,
    retrieve_passages,
)
from knowledge.models import Chunk

pytestmark = pytest.mark.django_db

PARAGRAPH = "Filler sentence about the weather and lunch plans for the team. " * 10


def test_answer_quotes_passages_and_numbers_them(handbook):
    # Given the handbook, whose quotas.md says how to free capacity
    # When someone asks how to free capacity when a quota limit is hit
    answer = answer_question(question="How do I free capacity when a quota limit is hit?", collection_ids=[handbook.id])

    # Then the answer quotes passages numbered from 1, the first from quotas.md about the my-resources screen
    assert answer.citations
    assert [citation.marker for citation in answer.citations] == list(range(1, len(answer.citations) + 1))
    first = answer.citations[0]
    assert first.document_name == "quotas.md"
    assert f"{first.quote} [1]" in answer.text
    assert "my-resources screen" in first.quote


def test_adjacent_chunks_of_one_document_merge_into_one_marker(make_collection, upload):
    # Given a document whose two zebra paragraphs are adjacent chunks between filler
    collection = make_collection()
    text = f"{PARAGRAPH}\n\nZebra crossings one.\n\nZebra crossings two.\n\n{PARAGRAPH}"
    upload(collection.id, "zebra.txt", text)
    zebra_chunks = [c.id for c in Chunk.objects.order_by("ordinal") if "Zebra" in c.text]

    # When someone asks about zebra crossings
    answer = answer_question(question="zebra crossings", collection_ids=[collection.id])

    # Then one marker cites both chunks
    assert len(answer.citations) == 1
    assert set(answer.citations[0].source_chunk_ids) == set(zebra_chunks)


def test_chunks_that_are_not_adjacent_get_separate_markers(make_collection, upload):
    # Given a document whose two zebra sentences sit in chunks far apart
    collection = make_collection()
    text = f"Zebra crossings one. {PARAGRAPH}\n\n{PARAGRAPH}\n\nZebra crossings two. {PARAGRAPH}"
    upload(collection.id, "zebra.txt", text)

    # When someone asks about zebra
    answer = answer_question(question="zebra", collection_ids=[collection.id])

    # Then each gets its own marker, each citing one chunk
    assert [len(citation.source_chunk_ids) for citation in answer.citations] == [1, 1]
    assert "[1]" in answer.text
    assert "[2]" in answer.text


def test_answer_that_finds_nothing_says_so_and_cites_nothing(handbook):
    # Given the handbook and a listener for the citations that count
    received = []

    # When someone asks about something it does not cover
    answer = answer_question(
        question="kubernetes helm charts", collection_ids=[handbook.id], on_citations=received.append
    )

    # Then the answer says nothing was found, cites nothing, and the listener hears an empty list
    assert answer.text == NOTHING_FOUND
    assert answer.citations == ()
    assert received == [[]]


def test_on_citations_receives_the_markers_that_count(handbook):
    # Given the handbook and a listener for the citations that count
    received = []

    # When someone asks about sharing chats
    answer = answer_question(question="share chat readers", collection_ids=[handbook.id], on_citations=received.append)

    # Then the listener hears the answer's citations
    assert received == [list(answer.citations)]


def test_markers_out_of_range_are_ignored_when_persisting():
    # Given an answer whose text names markers 1, 3 and 9, with citations for 1 and 9 only
    cited = Citation(1, "col", "doc", "a.txt", ("chk_1",))
    stray = Citation(9, "col", "doc", "a.txt", ("chk_2",))
    answer = Answer(text="See [1], and [3] and [9].", citations=(cited, stray))

    # When its citations are persisted / Then only marker 1 is: 3 and 9 lie past its two citations
    assert answer.persisted_citations() == [cited]


def test_citations_never_named_in_the_text_are_not_persisted():
    # Given two citations, and an answer whose text names only the second
    first = Citation(1, "col", "doc", "a.txt", ("chk_1",))
    second = Citation(2, "col", "doc", "a.txt", ("chk_2",))

    # When its citations are persisted / Then only the second is
    assert Answer(text="Only [2] is used.", citations=(first, second)).persisted_citations() == [second]


def test_another_answerer_plugs_in_behind_the_same_interface(handbook, settings):
    # Given an answerer that only counts the passages it gets
    class EchoAnswerer:
        def answer(self, *, question: str, passages: list[Passage]) -> Answer:
            return Answer(text=f"{len(passages)} passages for {question}", citations=())

    # When it answers a question about quota from the handbook
    answer = answer_question(question="quota", collection_ids=[handbook.id], answerer=EchoAnswerer())

    # Then its answer is the one returned
    assert answer.text == "1 passages for quota"


def test_extractive_answerer_quotes_at_most_three_passages():
    # Given five passages
    passages = [Passage("col", f"doc{n}", "a.txt", (f"chk{n}",), f"text {n}", 1.0) for n in range(5)]

    # When the extractive answerer answers
    answer = ExtractiveAnswerer().answer(question="q", passages=passages)

    # Then it quotes three of them, marked 1 to 3
    assert [citation.marker for citation in answer.citations] == [1, 2, 3]


def test_retrieval_skips_chunks_the_index_names_but_no_longer_exist(handbook):
    # Given the handbook whose sharing.md chunks were deleted behind the search index's back
    Chunk.objects.filter(document__filename="sharing.md").delete()

    # When passages about sharing chats are retrieved
    passages = retrieve_passages(question="share chat readers", collection_ids=[handbook.id])

    # Then none comes from sharing.md
    assert all(passage.document_name != "sharing.md" for passage in passages)


def test_a_bracketed_number_inside_a_source_cannot_pass_for_a_marker(make_collection, upload):
    # Given a document that cites reference [7] of a manual
    collection = make_collection()
    upload(collection.id, "refs.txt", "Zebra crossings are explained in reference [7] of the manual.")

    # When someone asks about what it says
    answer = answer_question(question="zebra crossings", collection_ids=[collection.id])

    # Then the quote shows the reference as (7), and the only marker that counts is [1]
    assert "[7]" not in answer.text
    assert "reference (7)" in answer.text
    assert [citation.marker for citation in answer.persisted_citations()] == [1]


def test_quotes_keep_the_sentences_that_share_words_with_the_question():
    # Given a passage with one sentence about closing a sandbox among others
    text = "Lunch is at noon. Close a sandbox to free capacity. The weather is fine. Parking is free."

    # When its best sentences for close and sandbox are picked / Then that sentence is kept alone
    assert best_sentences(text, ["close", "sandbox"]) == "Close a sandbox to free capacity."


def test_a_passage_that_shares_one_word_with_the_question_does_not_join_the_answer(make_collection, upload):
    # Given a backup policy, and a runbook whose only word in common with the question is "database"
    collection = make_collection()
    upload(collection.id, "backups.md", "# Backup policy\n\nDatabase backups are kept for 30 days, then deleted.")
    runbook = "# Slow pages\n\nFirst, check the load. Second, check the database connection pool."
    upload(collection.id, "runbook.md", runbook)

    # When someone asks how long database backups are kept
    answer = answer_question(question="How long are database backups kept?", collection_ids=[collection.id])

    # Then the answer quotes the backup policy as [1] and nothing else: no off-topic [2]
    assert [citation.document_name for citation in answer.citations] == ["backups.md"]
    assert "kept for 30 days" in answer.citations[0].quote
    assert "[2]" not in answer.text
    assert "connection pool" not in answer.text


def test_passages_about_the_question_are_all_kept():
    # Given two passages that each share two of the question's three words, and one that shares one
    passages = [
        Passage("col", "doc1", "a.txt", ("chk1",), "Backups of the database run nightly.", 2.0),
        Passage("col", "doc2", "b.txt", ("chk2",), "Database backups are kept for a month.", 1.5),
        Passage("col", "doc3", "c.txt", ("chk3",), "Check the database pool.", 1.0),
    ]

    # When they are filtered for "database backups kept" / Then the first two stay, in rank order
    kept = about_the_question(passages, ["database", "backups", "kept"])
    assert [passage.document_id for passage in kept] == ["doc1", "doc2"]


def _judged(document_id: str, text: str, similarity: float | None) -> Passage:
    return Passage("col", document_id, f"{document_id}.md", (f"chk-{document_id}",), text, 1.0, similarity=similarity)


def test_a_passage_far_in_meaning_that_shares_one_of_the_questions_words_is_left_out():
    # Given the only passages, each sharing "long" with a four-word question and far from it in meaning
    passages = [
        _judged("doc1", "A long command runs until it ends.", 0.12),
        _judged("doc2", "Sandboxes idle for long are reclaimed.", 0.21),
    ]

    # When they are filtered for how long database backups are kept / Then none stays
    assert about_the_question(passages, ["long", "database", "backups", "kept"]) == []


def test_a_passage_far_in_meaning_that_shares_half_the_questions_words_stays():
    # Given a passage sharing two of four words, at a low cosine
    passage = _judged("doc1", "Database backups run at night.", 0.25)

    # When it is filtered / Then it stays: its words say it is about the question
    assert about_the_question([passage], ["long", "database", "backups", "kept"]) == [passage]


def test_a_passage_near_in_meaning_stays_whatever_words_it_shares():
    # Given a passage that shares one word of four but is near the question in meaning
    passage = _judged("doc1", "Snapshots are retained for a year, long enough for audits.", 0.55)

    # When it is filtered / Then it stays
    assert about_the_question([passage], ["long", "database", "backups", "kept"]) == [passage]


def test_without_a_similarity_a_passage_is_judged_by_its_words_alone():
    # Given lexical retrieval only: a passage sharing one word of four, with no cosine
    passage = _judged("doc1", "A long command runs until it ends.", None)

    # When it is filtered / Then it stays, as before dense retrieval
    assert about_the_question([passage], ["long", "database", "backups", "kept"]) == [passage]
