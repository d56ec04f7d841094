"""Retrieval and answer quality, measured: lexical, dense and hybrid retrieval, and answers end to end.

Data: five articles of the SQuAD 2.0 development set (bench/data/README.md; Rajpurkar et al. 2018,
CC BY-SA 4.0): 173 paragraphs and 705 answerable crowd-written questions, each written about one
paragraph and answered by spans of it.

1. Retrieval. Each paragraph is uploaded as a document and ingested as the service ingests (chunks,
   search index, vectors of the packaged all-MiniLM-L6-v2). The paragraph a question was written
   about is its one relevant passage, judged by the person who wrote the question. For every
   question the 10 best paragraphs of lexical search (FTS5 bm25 / BM25 in PostgreSQL SQL), of dense
   retrieval and of their fusion give recall@10 and nDCG@10 (binary relevance), with fusion
   variants beside the service's choice (convex combinations of other weights, reciprocal rank
   fusion), and dense retrieval through the IVF index that collections of 20,000 vectors and more
   are searched with (knowledge/search/ivf.py), its lists shrunk to fit these few vectors.
2. Answers. Each article is uploaded as one document, and every question is asked through the chat
   API (POST /kb/chats/<id>/messages), lexical only and hybrid: how often the passage cited first
   ([1]) holds one of the question's answer spans, and how many markers an answer carries. The
   demo's questions (the handbook of `make run`, and the backup question of issue 26 over two
   uploaded Markdown files) list their markers with the document each cites; a marker citing a
   document that does not answer the question is counted off-topic. Questions the handbook does not
   answer are asked of it alone: an answer that cites anything for one of them is counted.

.venv/bin/python bench/retrieval.py [--questions N] [--database-url postgres://...]
It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import setup_django
from collab.actor import Actor

DATA = Path(__file__).resolve().parent / "data" / "squad-v2.0-dev-5-articles.json"
DISTRACTORS = Path(__file__).resolve().parent / "data" / "squad-v2.0-distractors.json"
USER = "alice"
DEPTH = 10
# Each question with the documents that answer it (sandboxes.md tells how to free capacity too).
DEMO_QUESTIONS = {
    "How do I free capacity when I hit my sandbox quota?": ("quotas.md", "sandboxes.md"),
    "Who can send messages in a shared chat?": ("sharing.md",),
    "How often does the page check for new notifications?": ("notifications.md",),
    "What happens to a sandbox that sits idle?": ("sandboxes.md",),
    "How long are database backups kept?": ("backups.md",),
}
# Questions the demo's handbook does not answer (alone, without the uploaded files): an answer to
# one should cite nothing rather than a page that shares one of its words.
UNCOVERED_QUESTIONS = (
    "How long are database backups kept?",
    "Which regions is the service deployed in?",
    "How do I rotate the TLS certificate?",
    "What does the premium plan cost per month?",
    "How long does a restore from backup take?",
)
UPLOADED = {
    "backups.md": "# Backup policy\n\n## Schedule\n\nDatabase backups run every night at 02:00. Backups are kept for "
    "one year.\n\n## Restores\n\nA restore is requested through the operations queue.",
    "runbook.md": "# Slow requests runbook\n\nFirst, look at the dashboards for the slow service. Second, check "
    "the database connection pool. Third, page the on-call engineer if requests still time out.",
}


@dataclass(frozen=True)
class Question:
    text: str
    paragraph: int
    answers: tuple[str, ...]


def load_squad() -> tuple[list[str], list[tuple[str, list[str]]], list[Question]]:
    """Paragraph texts, articles (title, paragraphs) and the answerable questions."""
    data = json.loads(DATA.read_text())
    paragraphs: list[str] = []
    articles: list[tuple[str, list[str]]] = []
    questions: list[Question] = []
    for article in data["data"]:
        texts = []
        for paragraph in article["paragraphs"]:
            number = len(paragraphs)
            paragraphs.append(paragraph["context"])
            texts.append(paragraph["context"])
            for qa in paragraph["qas"]:
                if qa.get("is_impossible"):
                    continue
                answers = tuple(dict.fromkeys(answer["text"] for answer in qa["answers"]))
                questions.append(Question(qa["question"], number, answers))
        articles.append((article["title"].replace("_", " "), texts))
    return paragraphs, articles, questions


def load_unanswerable() -> list[str]:
    """The five articles' questions that SQuAD 2.0 marks unanswerable from their paragraph."""
    data = json.loads(DATA.read_text())
    return [
        qa["question"]
        for article in data["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa.get("is_impossible")
    ]


def load_distractor_articles() -> list[tuple[str, list[str]]]:
    """31 more articles of SQuAD 2.0's development set (bench/data/README.md), their text only."""
    data = json.loads(DISTRACTORS.read_text())
    return [
        (article["title"].replace("_", " "), [paragraph["context"] for paragraph in article["paragraphs"]])
        for article in data["data"]
    ]


def upload(collection_id: str, filename: str, text: str) -> str:
    from knowledge import services
    from knowledge.ingest import document_embed, ingest_document

    document = services.document_upload(
        collection_id=collection_id,
        actor=Actor(USER),
        filename=filename,
        content_type="text/markdown",
        data=text.encode(),
    )
    ingest_document(document_id=document.id, content_version=document.content_version, user_id=USER)
    document_embed(document_id=document.id)
    return document.id


def reciprocal_rank_fusion(rankings: Sequence[Sequence], *, k: int) -> list:
    """Cormack, Clarke and Buettcher (SIGIR 2009), the usual alternative, for comparison."""
    from knowledge.search.base import SearchHit

    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + 1.0 / (k + rank)
    return [SearchHit(chunk_id, score) for chunk_id, score in sorted(fused.items(), key=lambda item: -item[1])]


def ndcg_and_recall(ranked: Sequence[str], relevant: str) -> tuple[float, float]:
    """Binary relevance with one relevant item: nDCG@10 is 1/log2(1 + rank), recall@10 is 1 or 0."""
    top = list(ranked)[:DEPTH]
    if relevant not in top:
        return 0.0, 0.0
    return 1 / math.log2(top.index(relevant) + 2), 1.0


@contextmanager
def small_ivf_lists() -> Iterator[None]:
    from knowledge.search import ivf

    saved = ivf.VECTORS_PER_LIST, ivf.MIN_PROBES
    ivf.VECTORS_PER_LIST, ivf.MIN_PROBES = 8, 1
    try:
        yield
    finally:
        ivf.VECTORS_PER_LIST, ivf.MIN_PROBES = saved


def retrieval(questions: list[Question], paragraphs: list[str]) -> None:
    from knowledge import services
    from knowledge.embeddings import get_embedder
    from knowledge.models import Chunk
    from knowledge.search import get_chunk_index
    from knowledge.search.dense import dense_search, vector_cache
    from knowledge.search.hybrid import (
        CANDIDATES,
        MIN_SIMILARITY,
        RELATIVE_SIMILARITY,
        convex_combination,
        hybrid_search,
    )

    collection = services.collection_create(actor=Actor(USER), name="SQuAD paragraphs")
    began = time.perf_counter()
    document_of_paragraph = [upload(collection.id, f"p{number:03}.md", text) for number, text in enumerate(paragraphs)]
    print(f"ingested {len(paragraphs)} paragraphs with vectors in {time.perf_counter() - began:.0f} s")
    paragraph_of_chunk = {
        chunk_id: document_of_paragraph.index(document_id)
        for chunk_id, document_id in Chunk.objects.values_list("id", "document_id")
    }
    embedder = get_embedder()
    scope = [collection.id]

    def paragraphs_of(hits: Sequence) -> list[str]:
        return list(dict.fromkeys(str(paragraph_of_chunk[hit.chunk_id]) for hit in hits))

    rankings: dict[str, Callable[[list, list], list]] = {
        "lexical": lambda lexical, dense: lexical,
        "dense": lambda lexical, dense: dense,
        **{
            f"hybrid, convex combination {weight}": lambda lexical, dense, weight=weight: convex_combination(
                lexical, dense, limit=CANDIDATES, weight=weight
            )
            for weight in (0.3, 0.5, 0.7)
        },
        **{
            f"hybrid, reciprocal rank fusion k={k}": lambda lexical, dense, k=k: reciprocal_rank_fusion(
                [lexical, dense], k=k
            )
            for k in (10, 60)
        },
    }
    weight = get_chunk_index().fusion_weight
    service = f"hybrid (service: convex {weight}, cosine >= {RELATIVE_SIMILARITY} x best)"
    # The IVF index (knowledge/search/ivf.py) on these few vectors: its lists shrunk to 8 vectors and
    # a fifth of them probed, so it reads about as small a share of them as it does at 10^5.
    ivf_name = "dense, IVF index (lists of 8 vectors, a fifth probed)"
    totals = {name: [0.0, 0.0] for name in [*rankings, ivf_name, service]}
    began = time.perf_counter()
    for question in questions:
        lexical = get_chunk_index().search(question=question.text, collection_ids=scope, limit=CANDIDATES)
        vector = embedder.embed([question.text])[0]
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=scope)
        dense = dense_search(vector=vector, blocks=blocks, limit=CANDIDATES, min_similarity=MIN_SIMILARITY)
        ranked = {name: rank(lexical, dense) for name, rank in rankings.items()}
        ranked[service] = hybrid_search(question=question.text, collection_ids=scope, limit=CANDIDATES)
        with small_ivf_lists():
            ranked[ivf_name] = dense_search(
                vector=vector,
                blocks=blocks,
                limit=CANDIDATES,
                min_similarity=MIN_SIMILARITY,
                model=embedder.model,
                ivf_min_vectors=1,
            )
        for name, hits in ranked.items():
            ndcg, recall = ndcg_and_recall(paragraphs_of(hits), str(question.paragraph))
            totals[name][0] += ndcg
            totals[name][1] += recall
    elapsed = time.perf_counter() - began
    print(f"{len(questions)} questions over {len(paragraphs)} paragraphs in {elapsed:.0f} s")
    print(f"| {'retrieval':<58} | {'questions':>9} | {'nDCG@10':>7} | {'recall@10':>9} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 9}|{'-' * 11}|")
    for name, (ndcg, recall) in totals.items():
        count = len(questions)
        print(f"| {name:<58} | {count:>9,} | {ndcg / count:>7.3f} | {recall / count:>9.3f} |")


@dataclass
class AnswerTally:
    asked: int = 0
    first_holds_answer: int = 0
    any_holds_answer: int = 0
    markers: int = 0
    no_answer: int = 0
    seconds: float = 0.0


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def holds_answer(text: str, answers: Sequence[str]) -> bool:
    flat = _flat(text)
    return any(_flat(answer) in flat for answer in answers)


def ask_all(chat_of: Callable[[], str], questions: list[Question]) -> AnswerTally:
    """Asks each question through the chat API (in-process: its time is the server's) and judges
    the answer's citations by the question's answer spans."""
    from django.test import Client

    from knowledge.models import Chunk

    client = Client(HTTP_X_USER_ID=USER)
    tally = AnswerTally()
    chat_id = chat_of()
    for number, question in enumerate(questions):
        if number and number % 100 == 0:
            chat_id = chat_of()  # a chat of hundreds of messages is not what is measured
        began = time.perf_counter()
        response = client.post(
            f"/kb/chats/{chat_id}/messages", {"content": question.text}, content_type="application/json"
        )
        tally.seconds += time.perf_counter() - began
        citations = response.json()["answer"]["citations"]
        tally.asked += 1
        tally.markers += len(citations)
        if not citations:
            tally.no_answer += 1
            continue
        texts = dict(
            Chunk.objects.filter(pk__in=[i for c in citations for i in c["source_chunk_ids"]]).values_list("id", "text")
        )
        held = [
            holds_answer(" ".join(texts.get(i, "") for i in citation["source_chunk_ids"]), question.answers)
            for citation in citations
        ]
        tally.first_holds_answer += held[0]
        tally.any_holds_answer += any(held)
    return tally


def demo_collections() -> list[str]:
    """The demo's handbook and the two Markdown files of issue 26, ingested with the current provider."""
    from knowledge import demo, services
    from knowledge.models import Collection

    demo.load(say=lambda line: None)
    uploaded = services.collection_create(actor=Actor(USER), name="Uploaded Markdown")
    for filename, text in UPLOADED.items():
        upload(uploaded.id, filename, text)
    return [Collection.objects.get(name=demo.COLLECTION_NAME).id, uploaded.id]


def demo_markers(mode: str, collection_ids: list[str]) -> None:
    from django.test import Client

    from knowledge import services

    chat = services.chat_create(actor=Actor(USER), title=f"Demo {mode}", collection_ids=collection_ids)
    client = Client(HTTP_X_USER_ID=USER)
    off_topic = markers = 0
    for question, expected in DEMO_QUESTIONS.items():
        response = client.post(f"/kb/chats/{chat.id}/messages", {"content": question}, content_type="application/json")
        cited = [citation["document_name"] for citation in response.json()["answer"]["citations"]]
        markers += len(cited)
        off_topic += sum(name not in expected for name in cited)
        print(f"  {mode:<8} {question!r}: {', '.join(f'[{n}] {name}' for n, name in enumerate(cited, 1)) or 'none'}")
    print(f"| demo questions, {mode:<8} | {len(DEMO_QUESTIONS):>9} | markers {markers} | off-topic {off_topic} |")
    handbook = services.chat_create(actor=Actor(USER), title=f"Handbook {mode}", collection_ids=collection_ids[:1])
    cited_any = 0
    for question in UNCOVERED_QUESTIONS:
        response = client.post(
            f"/kb/chats/{handbook.id}/messages", {"content": question}, content_type="application/json"
        )
        cited = [citation["document_name"] for citation in response.json()["answer"]["citations"]]
        cited_any += bool(cited)
        print(f"  {mode:<8} {question!r} (handbook only): {', '.join(cited) or 'none'}")
    print(f"| uncovered questions, {mode:<8} | {len(UNCOVERED_QUESTIONS):>9} | answered with a citation {cited_any} |")


def answers(questions: list[Question], articles: list[tuple[str, list[str]]]) -> None:
    from django.conf import settings

    from knowledge import services
    from knowledge.search.dense import vector_cache

    model_path = settings.WORKSPACE_EMBEDDINGS_PATH
    collection = services.collection_create(actor=Actor(USER), name="SQuAD articles")
    for title, paragraphs in articles:
        upload(collection.id, f"{title}.md", f"# {title}\n\n" + "\n\n".join(paragraphs))

    def new_chat() -> str:
        return services.chat_create(actor=Actor(USER), title="SQuAD", collection_ids=[collection.id]).id

    print(
        f"| {'answers through the chat API':<28} | {'questions':>9} | {'[1] holds':>9} | {'markers':>7} | {'none':>5} |"
    )
    print(f"|{'-' * 30}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 7}|")
    for mode, path in (("lexical", ""), ("hybrid", model_path)):
        settings.WORKSPACE_EMBEDDINGS_PATH = path
        vector_cache.clear()
        began = time.perf_counter()
        tally = ask_all(new_chat, questions)
        seconds = time.perf_counter() - began
        print(
            f"| {mode:<28} | {tally.asked:>9,} | {tally.first_holds_answer / tally.asked:>9.3f} | "
            f"{tally.markers / tally.asked:>7.2f} | {tally.no_answer:>5} |  "
            f"({seconds / tally.asked * 1000:.0f} ms each)"
        )
    settings.WORKSPACE_EMBEDDINGS_PATH = model_path
    demo = demo_collections()
    for mode, path in (("lexical", ""), ("hybrid", model_path)):
        settings.WORKSPACE_EMBEDDINGS_PATH = path
        demo_markers(mode, demo)
    settings.WORKSPACE_EMBEDDINGS_PATH = model_path


def ndcg_of_chunks(ranked: Sequence[str], texts: dict[str, str], answers: Sequence[str], relevant_total: int) -> float:
    """nDCG@10 with every chunk that holds an answer span relevant (binary), ideal = all of them first."""
    gains = [holds_answer(texts[chunk_id], answers) for chunk_id in ranked[:DEPTH]]
    dcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(relevant_total, DEPTH)))
    return dcg / ideal if ideal else 0.0


@dataclass(frozen=True)
class Mode:
    name: str
    embeddings_path: str
    rerank_path: str = ""
    rerank_depth: int = 0


def distractors(questions: list[Question], articles: list[tuple[str, list[str]]], modes: Sequence[Mode]) -> None:
    """The five articles' questions asked of a library of 36 articles: the answer (its [1], any
    citation, its markers, its time) through the chat API, nDCG@10 of the passages it draws on
    (their chunks in the order the answerer is given them, after any reranking), and how often one
    of those passages holds an answer at all ("answer given": what any citation can reach)."""
    from django.conf import settings

    from knowledge import services
    from knowledge.answers import retrieve_passages
    from knowledge.models import Chunk
    from knowledge.search.dense import vector_cache

    library = articles + load_distractor_articles()
    collection = services.collection_create(actor=Actor(USER), name="SQuAD library")
    began = time.perf_counter()
    for title, paragraphs in library:
        upload(collection.id, f"{title}.md", f"# {title}\n\n" + "\n\n".join(paragraphs))
    ingest_seconds = time.perf_counter() - began
    texts = dict(Chunk.objects.filter(collection_id=collection.id).values_list("id", "text"))
    words = sum(len(text.split()) for _, paragraphs in library for text in paragraphs)
    print(
        f"library: {len(library)} articles, {words:,} words, {len(texts):,} chunks; ingested with vectors in "
        f"{ingest_seconds:.0f} s ({ingest_seconds / len(texts) * 1000:.1f} ms a chunk)"
    )
    relevant_total = {
        question.text: sum(holds_answer(text, question.answers) for text in texts.values()) for question in questions
    }
    unanswerable = [Question(text, -1, ()) for text in load_unanswerable()][: len(questions)]

    def new_chat() -> str:
        return services.chat_create(actor=Actor(USER), title="SQuAD library", collection_ids=[collection.id]).id

    def retrieved(text: str) -> tuple[list[str], float]:
        """The chunks the answerer is given, in order, and the reranker's best score among them."""
        passages = retrieve_passages(question=text, collection_ids=[collection.id], limit=DEPTH)
        best = max((passage.relevance for passage in passages if passage.relevance is not None), default=-math.inf)
        return [chunk_id for passage in passages for chunk_id in passage.chunk_ids], best

    print(
        f"| {'among 36 articles':<22} | {'questions':>9} | {'[1] holds':>9} | {'any cited holds':>15} | "
        f"{'markers':>7} | {'nDCG@10':>7} | {'ms each':>7} | "
        f"{'unanswerable: nothing found':>27} | {'answerable: nothing found':>25} | {'answer given':>14} |"
    )
    print(
        f"|{'-' * 24}|{'-' * 11}|{'-' * 11}|{'-' * 17}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 29}|{'-' * 27}|{'-' * 16}|"
    )
    for mode in modes:
        settings.WORKSPACE_EMBEDDINGS_PATH = mode.embeddings_path
        settings.WORKSPACE_RERANK_PATH = mode.rerank_path
        settings.WORKSPACE_RERANK_DEPTH = mode.rerank_depth or settings.WORKSPACE_RERANK_DEPTH
        vector_cache.clear()
        ranked = [retrieved(question.text) for question in questions]
        found = sum(
            any(holds_answer(texts[chunk_id], question.answers) for chunk_id in chunks)
            for question, (chunks, _) in zip(questions, ranked, strict=True)
        ) / len(questions)
        ndcg = sum(
            ndcg_of_chunks(chunks, texts, question.answers, relevant_total[question.text])
            for question, (chunks, _) in zip(questions, ranked, strict=True)
        ) / len(questions)
        tally = ask_all(new_chat, questions)
        refused = ask_all(new_chat, unanswerable)
        print(
            f"| {mode.name:<22} | {tally.asked:>9,} | {tally.first_holds_answer / tally.asked:>9.3f} | "
            f"{tally.any_holds_answer / tally.asked:>15.3f} | {tally.markers / tally.asked:>7.2f} | {ndcg:>7.3f} | "
            f"{tally.seconds / tally.asked * 1000:>7.0f} | "
            f"{f'{refused.no_answer / refused.asked:.3f} of {refused.asked:,}':>27} | "
            f"{f'{tally.no_answer / tally.asked:.3f}':>25} | {found:>14.3f} |",
            flush=True,
        )
        if mode.rerank_path:
            relevance_cut(
                mode.name,
                [best for _, best in ranked],
                [retrieved(question.text)[1] for question in unanswerable],
            )


def relevance_cut(name: str, answerable: list[float], unanswerable: list[float]) -> None:
    """What a floor on the reranker's best score would do: the share of unanswerable questions it
    answers "nothing found", and the share of answerable ones it would wrongly refuse."""
    cuts = ", ".join(
        f"{floor:+g}: {sum(score < floor for score in unanswerable) / len(unanswerable):.2f} / "
        f"{sum(score < floor for score in answerable) / len(answerable):.2f}"
        for floor in (-6, -4, -2, 0, 2, 4)
    )
    print(f"  {name}, best score under a floor (unanswerable refused / answerable lost): {cuts}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=int, default=0, help="ask only the first N questions (0: all 705)")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""))
    parser.add_argument("--skip-answers", action="store_true", help="retrieval only")
    parser.add_argument(
        "--distractors", action="store_true", help="only the questions asked of 36 articles (31 distractors)"
    )
    parser.add_argument(
        "--rerank-depths",
        default="10",
        help="with --distractors: the packaged cross-encoder over the first N passages of hybrid, for each N",
    )
    parser.add_argument(
        "--relevance-margin",
        type=float,
        default=None,
        help="with --distractors: how far under the best reranked passage another is still quoted",
    )
    args = parser.parse_args()
    from knowledge.embeddings.local import packaged_model_path
    from knowledge.rerank import packaged_reranker_path

    model_path, rerank_path = packaged_model_path(), packaged_reranker_path()
    os.environ["WORKSPACE_EMBEDDINGS_PATH"] = model_path
    os.environ.setdefault("KNOWLEDGE_ANSWERER", "knowledge.answers.ExtractiveAnswerer")
    vendor = setup_django(args.database_url, "retrieval")
    paragraphs, articles, questions = load_squad()
    if args.questions:
        # Every n-th question, so each article keeps its share.
        step = max(len(questions) // args.questions, 1)
        questions = questions[::step][: args.questions]
    print(f"{vendor}: SQuAD 2.0 dev, 5 articles (CC BY-SA 4.0), {len(questions)} answerable questions")
    if args.distractors:
        if args.relevance_margin is not None:
            from knowledge import answers as answers_module

            answers_module.RELEVANCE_MARGIN = args.relevance_margin
        depths = [int(depth) for depth in args.rerank_depths.split(",") if depth] if rerank_path else []
        modes = [Mode("lexical", ""), Mode("hybrid", model_path)] + [
            Mode(f"hybrid, reranked top {depth}", model_path, rerank_path, depth) for depth in depths
        ]
        distractors(questions, articles, modes)
        return
    retrieval(questions, paragraphs)
    if not args.skip_answers:
        answers(questions, articles)


if __name__ == "__main__":
    main()
