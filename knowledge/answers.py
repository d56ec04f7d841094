"""Answering a question from the knowledge base: retrieval, the answerer interface, the extractive answerer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import groupby
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.models import Chunk
from knowledge.rerank import get_reranker, reranked
from knowledge.search import search_terms
from knowledge.search.hybrid import hybrid_search

SEARCH_LIMIT = 8
MAX_PASSAGES = 3
MAX_QUOTED_SENTENCES = 3
# The cosine (all-MiniLM-L6-v2) under which a passage must share half the question's words to be
# quoted: 3.1% of the SQuAD paragraphs that hold an answer fall below it, against most of the
# passages that share one word of a question no document covers (bench/retrieval.py measures both).
MIN_ANSWER_SIMILARITY = 0.3
# How far under the best passage's reranker score another may be and still be quoted beside it, in
# the packaged cross-encoder's logits (3: odds twenty times lower). Without a reranker's scores the
# word and meaning rules alone decide.
RELEVANCE_MARGIN = 3.0
# The reranker's score at and above which its favourite passage is quoted even when it shares few
# of the question's words ("In what country is Normandy located?" against a paragraph on "the
# Normans ... in France"): the word rule dropped the answer-holding passage, scored -8.6 to 4.6, in
# 8 of 300 SQuAD questions among distractors, while the demo handbook's best passages for
# questions it does not cover score -9.4 and below (bench/retrieval.py).
RELEVANT_DESPITE_WORDS = -6.0
NOTHING_FOUND = (
    "I found nothing in the selected collections about that. Try other words, or add a document that covers it."
)
_MARKER = re.compile(r"\[(\d{1,4})\]")
_WORD = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


@dataclass(frozen=True)
class Passage:
    """Retrieved text: one chunk, or a run of adjacent chunks of one section of a document merged;
    `title` is the section's headings, which the text does not repeat."""

    collection_id: str
    document_id: str
    document_name: str
    chunk_ids: tuple[str, ...]
    text: str
    score: float
    title: str = ""
    # The best cosine to the question among its chunks; None where dense retrieval did not judge it.
    similarity: float | None = None
    # Its chunks' texts, in order (`text` joins them): what a reranker reads, one at a time.
    chunk_texts: tuple[str, ...] = ()
    # The reranker's score for it (its best chunk's); None where no reranker read it.
    relevance: float | None = None


@dataclass(frozen=True)
class Citation:
    """One `[n]` marker of an answer and the chunks behind it."""

    marker: int
    collection_id: str
    document_id: str
    document_name: str
    source_chunk_ids: tuple[str, ...]
    quote: str = ""
    # The cited section's headings: the preview shows them once a re-upload has replaced the chunks.
    title: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "source_chunk_ids": list(self.source_chunk_ids)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Citation:
        return cls(
            marker=int(raw["marker"]),
            collection_id=str(raw["collection_id"]),
            document_id=str(raw["document_id"]),
            document_name=str(raw.get("document_name", "")),
            source_chunk_ids=tuple(str(chunk_id) for chunk_id in raw.get("source_chunk_ids", ())),
            quote=str(raw.get("quote", "")),
            title=str(raw.get("title", "")),
        )


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[Citation, ...]

    def persisted_citations(self) -> list[Citation]:
        """The markers that count: used in the text and within 1..len(citations), once each.

        An answerer (an LLM above all) may write `[7]` with three sources or list a source it
        never cites; neither may produce a citation event.
        """
        in_text = {int(number) for number in _MARKER.findall(self.text)}
        in_range = range(1, len(self.citations) + 1)
        chosen: dict[int, Citation] = {}
        for citation in self.citations:
            if citation.marker in in_range and citation.marker in in_text:
                chosen.setdefault(citation.marker, citation)
        return [chosen[marker] for marker in sorted(chosen)]


class Answerer(Protocol):
    """Turns retrieved passages into an answer; the model answerer (knowledge/model_answers.py)
    plugs in here. One that can also `stream(question=, passages=)` yields `AnswerEvent`s."""

    def answer(self, *, question: str, passages: Sequence[Passage]) -> Answer: ...


@dataclass(frozen=True)
class Restart:
    """The text streamed so far is withdrawn and the answer starts again: the model failed
    midway (`reason`, one sentence) and the fallback answer follows."""

    reason: str


# What an answer stream yields: pieces of text as they are written, perhaps a Restart, then the Answer.
AnswerEvent = str | Restart | Answer


class ExtractiveAnswerer:
    """Quotes the best passages verbatim and numbers them in rank order; invents nothing."""

    def answer(self, *, question: str, passages: Sequence[Passage]) -> Answer:
        terms = search_terms(question)
        chosen = about_the_question(passages, terms)[:MAX_PASSAGES]
        if not chosen:
            return Answer(text=NOTHING_FOUND, citations=())
        citations = tuple(
            Citation(
                marker=number,
                collection_id=passage.collection_id,
                document_id=passage.document_id,
                document_name=passage.document_name,
                source_chunk_ids=passage.chunk_ids,
                quote=best_sentences(passage.text, terms),
                title=passage.title,
            )
            for number, passage in enumerate(chosen, start=1)
        )
        quoted = "\n\n".join(f"{citation.quote} [{citation.marker}]" for citation in citations)
        return Answer(text=f"Here is what the knowledge base says:\n\n{quoted}", citations=citations)


def about_the_question(passages: Sequence[Passage], terms: list[str]) -> list[Passage]:
    """The passages, in rank order, that share more than half as many of the question's words as
    the passage sharing most: retrieval lets in any passage with one word of the question ("database"
    brings a runbook's connection-pool step to a question on database backups), an answer should not.
    A passage far from the question in meaning (`MIN_ANSWER_SIMILARITY`) must also share at least
    half of the question's words: when no document covers the question, the passages that share
    one word of it ("long") all rank alike, and none of them is about it.

    A passage's section title counts as its words (the search indexes it too). When no passage
    shares a word as these prefixes see it (the search stems better), the word rule drops none and
    only the meaning rule applies. Where a reranker scored them, its favourite is quoted whatever
    words it shares (`RELEVANT_DESPITE_WORDS`), and a passage scored more than `RELEVANCE_MARGIN`
    under the best is not quoted beside it.
    """
    wanted = _stems(terms)
    overlaps = [len(wanted & _text_stems(f"{passage.title}\n{passage.text}")) for passage in passages]
    best = max(overlaps, default=0)
    favourite = _reranker_favourite(passages)
    about = [
        passage
        for passage, overlap in zip(passages, overlaps, strict=True)
        if passage is favourite
        or ((best == 0 or overlap * 2 > best) and _near_or_on_topic(passage, overlap=overlap, wanted=len(wanted)))
    ]
    # Measured from the best of those left: the reranker's favourite may share too few words.
    most_relevant = max((passage.relevance for passage in about if passage.relevance is not None), default=None)
    return [passage for passage in about if _near_the_most_relevant(passage, most_relevant)]


def _reranker_favourite(passages: Sequence[Passage]) -> Passage | None:
    """The passage the reranker scores best, where it scores it at least `RELEVANT_DESPITE_WORDS`:
    a cross-encoder reads the question against the text, so a paraphrase counts where the word rule
    sees only the words."""
    scores = {index: passage.relevance for index, passage in enumerate(passages) if passage.relevance is not None}
    if not scores:
        return None
    best = max(scores, key=scores.__getitem__)
    return passages[best] if scores[best] >= RELEVANT_DESPITE_WORDS else None


def _near_the_most_relevant(passage: Passage, most_relevant: float | None) -> bool:
    if passage.relevance is None or most_relevant is None:
        return True
    return passage.relevance >= most_relevant - RELEVANCE_MARGIN


def _near_or_on_topic(passage: Passage, *, overlap: int, wanted: int) -> bool:
    if passage.similarity is None or passage.similarity >= MIN_ANSWER_SIMILARITY:
        return True
    return overlap * 2 >= wanted


def _stems(words: list[str]) -> set[str]:
    # Five-letter prefixes stand in for stemming: "sharing" meets "shared", "quotas" meets "quota".
    return {word[:5] for word in words}


def _text_stems(text: str) -> set[str]:
    """Every word's stem (search_terms keeps only a question's first few words)."""
    return _stems(_WORD.findall(text.lower()))


def best_sentences(text: str, terms: list[str], *, limit: int = MAX_QUOTED_SENTENCES) -> str:
    """The sentences sharing most words with the question, in their own order; the whole chunk is
    one click away, so the answer stays short. A `[n]` inside the source is defused so it can never
    pass for one of the answer's markers."""
    sentences = [" ".join(part.split()) for part in _SENTENCE.split(text) if part.strip()]
    stems = _stems(terms)

    def overlap(sentence: str) -> int:
        return len(stems & _text_stems(sentence))

    ranked = sorted(range(len(sentences)), key=lambda index: (-overlap(sentences[index]), index))
    keep = sorted(index for index in ranked[:limit] if overlap(sentences[index]) > 0) or list(range(min(2, limit)))
    quote = " … ".join(sentences[index] for index in keep if index < len(sentences))
    return _MARKER.sub(r"(\1)", quote)


def default_answerer() -> Answerer:
    """KNOWLEDGE_ANSWERER when set, else the model answerer where a provider is configured, else
    the extractive answerer."""
    if settings.KNOWLEDGE_ANSWERER:
        return import_string(settings.KNOWLEDGE_ANSWERER)()
    if settings.WORKSPACE_LLM_BASE_URL:
        return import_string("knowledge.model_answers.ModelAnswerer")()
    return ExtractiveAnswerer()


def retrieve_passages(*, question: str, collection_ids: Sequence[str], limit: int = SEARCH_LIMIT) -> list[Passage]:
    """Best first (words and meaning fused where an embedding provider is configured: README
    "Hybrid retrieval", then reordered by a reranker where one is: README "Reranking"); hits that
    are consecutive chunks of one section of a document become one passage."""
    # A reranker reads deeper than an answer quotes: the passage it lifts to first is often below
    # the first stage's eighth.
    reranking = get_reranker() is not None
    depth = max(limit, settings.WORKSPACE_RERANK_DEPTH) if reranking else limit
    hits = hybrid_search(question=question, collection_ids=collection_ids, limit=depth, keep_far=reranking)
    if not hits:
        return []
    score_of = {hit.chunk_id: hit.score for hit in hits}
    similarity_of = {hit.chunk_id: hit.similarity for hit in hits if hit.similarity is not None}
    # Chunks the index still names but a re-upload has since removed simply drop out here.
    rows = list(
        Chunk.objects.filter(pk__in=score_of)
        .order_by("document_id", "ordinal")
        .values("id", "document_id", "collection_id", "ordinal", "title", "text", "document__filename")
    )
    passages: list[Passage] = []
    for _document_id, document_rows in groupby(rows, key=lambda row: row["document_id"]):
        passages.extend(_merged_runs(list(document_rows), score_of, similarity_of))
    passages.sort(key=lambda passage: (-passage.score, passage.document_id, passage.chunk_ids))
    passages = reranked(
        question=question,
        ranked=passages,
        pieces_of=_passage_pieces,
        scored=lambda passage, score: replace(passage, relevance=score),
    )
    floor = settings.WORKSPACE_RERANK_MIN_SCORE
    if floor is not None and passages and passages[0].relevance is not None:
        # The reranker read them (it did not fail): what it scored under the floor, and what it did
        # not read, answers nothing.
        passages = [passage for passage in passages if passage.relevance is not None and passage.relevance >= floor]
    return passages[:limit]


def _passage_pieces(passage: Passage) -> list[str]:
    """What a reranker reads of a passage: each of its chunks, after its section's headings. A
    cross-encoder reads a few hundred tokens at most, and a passage of merged chunks is longer: read
    whole, its end (often the answer) would be cut off."""
    texts = passage.chunk_texts or (passage.text,)
    return [f"{passage.title}\n\n{text}" if passage.title else text for text in texts]


def _merged_runs(
    rows: list[dict[str, Any]], score_of: dict[str, float], similarity_of: dict[str, float]
) -> list[Passage]:
    runs: list[list[dict[str, Any]]] = []
    for row in rows:
        previous = runs[-1][-1] if runs else None
        if previous and previous["ordinal"] + 1 == row["ordinal"] and previous["title"] == row["title"]:
            runs[-1].append(row)
        else:
            runs.append([row])
    return [
        Passage(
            collection_id=run[0]["collection_id"],
            document_id=run[0]["document_id"],
            document_name=run[0]["document__filename"],
            chunk_ids=tuple(row["id"] for row in run),
            text="\n\n".join(row["text"] for row in run),
            score=max(score_of[row["id"]] for row in run),
            title=run[0]["title"],
            similarity=max((similarity_of[row["id"]] for row in run if row["id"] in similarity_of), default=None),
            chunk_texts=tuple(row["text"] for row in run),
        )
        for run in runs
    ]


def answer_events(
    *, question: str, collection_ids: Sequence[str], answerer: Answerer | None = None
) -> Iterator[AnswerEvent]:
    """Retrieves, then answers as the answerer writes: text pieces (a whole answer at once from an
    answerer that does not stream), perhaps a `Restart`, and last the `Answer`."""
    passages = retrieve_passages(question=question, collection_ids=collection_ids)
    chosen = answerer or default_answerer()
    stream = getattr(chosen, "stream", None)
    if stream is not None:
        yield from stream(question=question, passages=passages)
        return
    answer = chosen.answer(question=question, passages=passages)
    yield answer.text
    yield answer


def final_answer(events: Iterable[AnswerEvent]) -> Answer:
    """The `Answer` that ends a stream of answer events."""
    answer = None
    for event in events:
        answer = event
    if not isinstance(answer, Answer):
        raise TypeError(f"an answer stream must end with an Answer, not {answer!r}")
    return answer


def answer_question(
    *,
    question: str,
    collection_ids: Sequence[str],
    on_citations: Callable[[list[Citation]], None] | None = None,
    answerer: Answerer | None = None,
) -> Answer:
    """Retrieves, answers, then hands the markers that count to `on_citations` (the KB chat and
    the investigation layer record events there, each with its own origin)."""
    answer = final_answer(answer_events(question=question, collection_ids=collection_ids, answerer=answerer))
    if on_citations is not None:
        on_citations(answer.persisted_citations())
    return answer
