"""Hybrid retrieval: chunk vectors stored at ingest, dense search fused with the lexical index, and
lexical search alone wherever vectors are missing (no provider, a failing provider, pending chunks)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.contrib.admin.utils import quote
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from collab.actor import Actor
from knowledge.answers import NOTHING_FOUND, retrieve_passages
from knowledge.demo import DOCS_DIR
from knowledge.embeddings import EmbeddingError, get_embedder
from knowledge.embeddings.local import LocalEmbedder
from knowledge.ingest import embeddings_backfill
from knowledge.models import Chunk, ChunkEmbedding
from knowledge.search import get_chunk_index
from knowledge.search.base import SearchHit
from knowledge.search.dense import dense_search, vector_cache
from knowledge.search.hybrid import convex_combination, hybrid_search
from knowledge.services import document_delete

pytestmark = pytest.mark.django_db

BACKUPS = "# Backups\n\nDatabase backups are kept for thirty days, then deleted."
RUNBOOK = "# Runbook\n\nWhen requests time out, first check the database connection pool."
OTHER_WORDS = "how long do we retain snapshots"


def _fail(self: LocalEmbedder, texts: object) -> np.ndarray:
    raise EmbeddingError("The embedding provider is unreachable.")


@pytest.fixture
def ops(make_collection, upload):
    """Two small documents, uploaded and ingested before any provider is configured."""

    def build():
        collection = make_collection("Ops")
        upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")
        upload(collection.id, "runbook.md", RUNBOOK, content_type="text/markdown")
        return collection

    return build


def _filenames(passages) -> list[str]:
    return [passage.document_name for passage in passages]


def test_a_question_in_other_words_finds_the_passage_by_meaning(local_embeddings, ops):
    # Given a collection ingested with the local model
    collection = ops()

    # When a question shares no word with the passage that answers it
    passages = retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id])

    # Then dense retrieval finds it first
    assert _filenames(passages)[:1] == ["backups.md"]


def test_without_a_provider_retrieval_is_lexical_as_before(ops):
    # Given no embedding provider
    collection = ops()

    # When the same question in other words is asked / Then nothing is found, and nothing was embedded
    assert retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id]) == []
    assert not ChunkEmbedding.objects.exists()


def test_ingest_stores_one_unit_vector_per_chunk_under_the_model(local_embeddings, ops):
    # Given the local model
    # When two documents are uploaded and ingested
    collection = ops()

    # Then every chunk has one float32 vector of length 1 under the model's name
    model = get_embedder().model
    rows = list(ChunkEmbedding.objects.filter(collection_id=collection.id))
    assert sorted(row.chunk_id for row in rows) == sorted(Chunk.objects.values_list("pk", flat=True))
    assert {row.model for row in rows} == {model}
    for row in rows:
        vector = np.frombuffer(bytes(row.vector), dtype="<f4")
        assert vector.shape == (384,)
        assert abs(float(np.linalg.norm(vector)) - 1) < 1e-4


def test_a_reupload_replaces_the_vectors_with_those_of_the_new_chunks(local_embeddings, ops, upload):
    # Given an embedded collection
    collection = ops()
    before = set(ChunkEmbedding.objects.values_list("chunk_id", flat=True))

    # When backups.md is uploaded again with other text
    upload(collection.id, "backups.md", "# Backups\n\nSnapshots are taken every night.", content_type="text/markdown")

    # Then the vectors are exactly those of the current chunks, the old ones gone
    after = set(ChunkEmbedding.objects.values_list("chunk_id", flat=True))
    assert after == set(Chunk.objects.values_list("pk", flat=True))
    assert len(after - before) == 1


def test_a_provider_failure_at_ingest_leaves_the_document_ready_and_its_chunks_pending(
    local_embeddings, ops, monkeypatch
):
    # Given a provider that fails
    monkeypatch.setattr(LocalEmbedder, "embed", _fail)

    # When documents are uploaded
    collection = ops()

    # Then they are ready and found by words, with no vector stored
    assert set(collection.documents.values_list("status", flat=True)) == {"ready"}
    assert not ChunkEmbedding.objects.exists()
    passages = retrieve_passages(question="How long are database backups kept?", collection_ids=[collection.id])
    assert _filenames(passages)[:1] == ["backups.md"]


def test_the_backfill_embeds_the_chunks_a_failing_provider_left_pending(local_embeddings, ops, monkeypatch):
    # Given chunks left pending by a provider that failed
    with monkeypatch.context() as patch:
        patch.setattr(LocalEmbedder, "embed", _fail)
        collection = ops()

    # When the worker's backfill runs with the provider back
    result = embeddings_backfill()

    # Then every chunk is embedded and the question in other words is found by meaning
    assert result == {"embedded": 2, "pending": 0}
    assert _filenames(retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id]))[:1] == ["backups.md"]


def test_the_backfill_embeds_chunks_ingested_before_a_provider_was_configured(ops, settings, local_embeddings):
    # Given a collection ingested without a provider, then the local model configured
    settings.WORKSPACE_EMBEDDINGS_PATH = ""
    collection = ops()
    settings.WORKSPACE_EMBEDDINGS_PATH = local_embeddings

    # When the backfill runs with a batch of one
    first = embeddings_backfill(limit=1)

    # Then one chunk is embedded and one is still pending
    assert first == {"embedded": 1, "pending": 1}
    assert ChunkEmbedding.objects.filter(collection_id=collection.id).count() == 1


def test_the_backfill_does_nothing_without_a_provider(ops):
    # Given no provider / When the backfill runs / Then it embeds nothing
    ops()
    assert embeddings_backfill() == {"embedded": 0, "pending": 0}


def test_a_question_while_the_provider_is_down_is_answered_by_words(local_embeddings, ops, ask, make_chat, monkeypatch):
    # Given an embedded collection and a chat over it
    collection = ops()
    chat = make_chat(collection)

    # When the provider fails while a question is asked
    monkeypatch.setattr(LocalEmbedder, "embed", _fail)
    response = ask(chat.id, "How long are database backups kept?")

    # Then the answer comes from lexical search
    assert response.status_code == 201, response.content
    assert "thirty days" in response.json()["answer"]["content"]


def test_an_unexpected_failure_on_the_embedding_thread_still_answers_by_words(
    local_embeddings, ops, ask, make_chat, monkeypatch
):
    # Given an embedded collection, a chat over it, and a model that breaks in a way no provider error names
    collection = ops()
    chat = make_chat(collection)

    def breaks(self: LocalEmbedder, texts: object) -> np.ndarray:
        raise RuntimeError("the inference session died")

    monkeypatch.setattr(LocalEmbedder, "embed", breaks)

    # When a question is asked
    response = ask(chat.id, "How long are database backups kept?")

    # Then it is answered from lexical search, not a 500
    assert response.status_code == 201, response.content
    assert "thirty days" in response.json()["answer"]["content"]


def test_a_question_about_nothing_in_the_collection_still_finds_nothing(local_embeddings, ops, ask, make_chat):
    # Given an embedded collection
    collection = ops()
    chat = make_chat(collection)

    # When the question is about something no document speaks of
    response = ask(chat.id, "What is the capital of France?")

    # Then dense retrieval does not invent a passage
    assert response.json()["answer"]["content"] == NOTHING_FOUND


def test_deleting_a_document_or_a_collection_drops_its_vectors(local_embeddings, ops, api_client_for):
    # Given an embedded collection
    first = ops()
    client = api_client_for("alice")
    document = first.documents.get(filename="backups.md")

    # When a document is deleted / Then its vectors go
    assert client.delete(f"/kb/documents/{document.id}").status_code == 204
    assert not ChunkEmbedding.objects.filter(document_id=document.id).exists()

    # When the collection is deleted / Then every vector of it goes
    assert client.delete(f"/kb/collections/{first.id}").status_code == 204
    assert not ChunkEmbedding.objects.filter(collection_id=first.id).exists()


def test_dense_search_sees_vectors_added_and_removed_since_its_cache_was_filled(local_embeddings, ops, upload):
    # Given a collection searched once, so its vectors are cached
    collection = ops()
    embedder = get_embedder()
    vector = embedder.embed([OTHER_WORDS])[0]

    def found() -> set[str]:
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=[collection.id])
        hits = dense_search(vector=vector, blocks=blocks, limit=10, min_similarity=-1)
        return {Chunk.objects.get(pk=hit.chunk_id).document.filename for hit in hits}

    assert found() == {"backups.md", "runbook.md"}

    # When a document is added / Then the next search sees it
    upload(collection.id, "snapshots.md", "Snapshots are retained for a week.", content_type="text/markdown")
    assert found() == {"backups.md", "runbook.md", "snapshots.md"}

    # When a document is deleted / Then the next search no longer does
    document_delete(document_id=collection.documents.get(filename="runbook.md").id, actor=Actor("alice"))
    assert found() == {"backups.md", "snapshots.md"}


def test_dense_search_reads_each_collections_vectors_once(local_embeddings, ops, django_assert_max_num_queries):
    # Given a collection searched once
    collection = ops()
    embedder = get_embedder()
    vector_cache.blocks(model=embedder.model, collection_ids=[collection.id])

    # When it is searched again / Then only the freshness check reaches the database
    with django_assert_max_num_queries(1):
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=[collection.id])
    assert dense_search(vector=embedder.embed([OTHER_WORDS])[0], blocks=blocks, limit=5, min_similarity=0)


def test_fusion_puts_a_chunk_both_rankings_like_first():
    # Given two rankings on different scales that agree only on "b"
    lexical = [SearchHit("a", 9.0), SearchHit("b", 8.0), SearchHit("c", 1.0)]
    dense = [SearchHit("d", 0.9), SearchHit("b", 0.8), SearchHit("e", 0.2)]

    # When they are fused / Then "b" leads, the best of each follow, and the limit holds
    fused = convex_combination(lexical, dense, limit=3, weight=0.5)
    assert [hit.chunk_id for hit in fused] == ["b", "a", "d"]


def test_fusion_weighs_each_ranking_by_its_share():
    # Given two rankings that disagree
    lexical = [SearchHit("a", 3.0), SearchHit("b", 1.0)]
    dense = [SearchHit("b", 0.7), SearchHit("a", 0.1)]

    # When words weigh more, and then meaning / Then each leads in turn
    assert convex_combination(lexical, dense, limit=1, weight=0.8)[0].chunk_id == "a"
    assert convex_combination(lexical, dense, limit=1, weight=0.2)[0].chunk_id == "b"


def test_the_local_model_puts_a_paraphrase_nearer_than_an_unrelated_sentence(local_embeddings):
    # Given the packaged model
    embedder = get_embedder()

    # When a question, its paraphrase and an unrelated sentence are embedded
    question, paraphrase, unrelated = embedder.embed(
        ["How long are database backups kept?", "Backups are retained for thirty days.", "The cat sat on the mat."]
    )

    # Then the paraphrase is much nearer
    assert question @ paraphrase > 0.6
    assert question @ unrelated < 0.2


def test_a_model_directory_without_weights_is_refused_at_once(tmp_path, settings):
    # Given a path that holds no model
    settings.WORKSPACE_EMBEDDINGS_PATH = str(tmp_path)

    # When the provider is built / Then the setting is named
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_EMBEDDINGS_PATH"):
        get_embedder()


def test_naming_two_providers_is_refused(settings, local_embeddings):
    # Given both an endpoint and a local model
    settings.WORKSPACE_EMBEDDINGS_BASE_URL = "http://127.0.0.1:9/v1"

    # When the provider is built / Then the two settings are named
    with pytest.raises(ImproperlyConfigured, match="not both"):
        get_embedder()


def test_vector_cache_is_per_model(local_embeddings, ops):
    # Given an embedded collection
    collection = ops()

    # When vectors of another model are asked for / Then there are none to compare
    vector_cache.clear()
    assert vector_cache.blocks(model="other", collection_ids=[collection.id]) == []


def test_staff_see_on_the_collection_page_how_many_passages_wait_for_a_vector(
    local_embeddings, ops, browser_for, monkeypatch
):
    # Given a collection ingested while the provider failed
    with monkeypatch.context() as patch:
        patch.setattr(LocalEmbedder, "embed", _fail)
        collection = ops()

    # When alice (staff) opens it / Then she reads that both passages are found by words only for now
    page = browser_for("alice").get(f"/kb/collections/{collection.id}/documents").content.decode()
    assert 'data-testid="embeddings-pending"><strong>2</strong> of 2 passages' in page

    # When the backfill has embedded them / Then the page says all are embedded
    embeddings_backfill()
    page = browser_for("alice").get(f"/kb/collections/{collection.id}/documents").content.decode()
    assert "All 2 passages embedded" in page


def test_staff_see_that_no_provider_means_words_only(ops, browser_for):
    # Given no embedding provider
    collection = ops()

    # When alice (staff) opens the collection / Then she reads that search is by words only
    page = browser_for("alice").get(f"/kb/collections/{collection.id}/documents").content.decode()
    assert 'data-testid="embeddings-off"' in page


def test_people_who_are_not_staff_see_no_embedding_state(local_embeddings, ops, browser_for):
    # Given an embedded collection
    collection = ops()

    # When bob (not staff) opens it / Then the page has no embedding section
    response = browser_for("bob").get(f"/kb/collections/{collection.id}/documents")
    assert response.status_code == 200
    assert 'data-testid="embeddings"' not in response.content.decode()


def test_admin_shows_a_collections_pending_chunks(local_embeddings, ops, admin_client_logged_in, monkeypatch):
    # Given a collection whose chunks the provider could not embed
    with monkeypatch.context() as patch:
        patch.setattr(LocalEmbedder, "embed", _fail)
        collection = ops()

    # When staff open it in admin / Then the pending chunks are stated
    # (Through admin's quote(), as admin's own links: an id like col_22... unquoted reads `_22` as `"`.)
    response = admin_client_logged_in.get(reverse("admin:knowledge_collection_change", args=[quote(collection.id)]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "2 of 2 chunks pending" in page


@pytest.fixture
def demo_pages(make_collection, upload):
    """The demo handbook's pages on sharing, sandboxes and notifications."""
    collection = make_collection("Handbook")
    for name in ("sharing.md", "sandboxes.md", "notifications.md"):
        upload(collection.id, name, (DOCS_DIR / name).read_text(), content_type="text/markdown")
    return collection


def test_a_passage_that_shares_only_words_with_the_question_is_left_out(local_embeddings, demo_pages):
    # Given the handbook, where "messages", "shared" and "chat" also appear on other pages
    # When a question about sharing is asked
    passages = retrieve_passages(question="Who can send messages in a shared chat?", collection_ids=[demo_pages.id])

    # Then only the sharing page is retrieved: the others are far from it in meaning
    assert _filenames(passages) == ["sharing.md"]


def test_a_question_no_page_answers_cites_none_of_the_pages_that_share_one_of_its_words(
    local_embeddings, demo_pages, ask, make_chat
):
    # Given the handbook, which says nothing of backups but uses "long" on several pages
    chat = make_chat(demo_pages)

    # When someone asks how long database backups are kept
    response = ask(chat.id, "How long are database backups kept?")

    # Then the answer says the documents do not cover it, and cites nothing
    assert response.status_code == 201, response.content
    assert response.json()["answer"]["content"] == NOTHING_FOUND
    assert response.json()["answer"]["citations"] == []


def test_retrieved_passages_carry_their_similarity_to_the_question(local_embeddings, ops):
    # Given an embedded collection / When a question about backups is asked
    passages = retrieve_passages(question="How long are database backups kept?", collection_ids=[ops().id])

    # Then the backup policy comes first, with its cosine to the question
    assert passages[0].document_name == "backups.md"
    assert passages[0].similarity is not None
    assert passages[0].similarity > 0.5


def test_the_question_is_embedded_while_the_words_are_ranked(local_embeddings, ops, monkeypatch):
    # Given an embedded collection, and an index whose search waits until the question's embedding begins
    collection = ops()
    embedding_began = threading.Event()
    embed, search = LocalEmbedder.embed, type(get_chunk_index()).search

    def embed_and_signal(self, texts):
        embedding_began.set()
        return embed(self, texts)

    def search_after_the_embedding_began(self, **kwargs):
        assert embedding_began.wait(timeout=10), "the question was not being embedded during the lexical search"
        return search(self, **kwargs)

    monkeypatch.setattr(LocalEmbedder, "embed", embed_and_signal)
    monkeypatch.setattr(type(get_chunk_index()), "search", search_after_the_embedding_began)

    # When a question is retrieved / Then both rankings took part: the backup policy comes first
    passages = retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id])
    assert _filenames(passages)[:1] == ["backups.md"]


def test_by_words_alone_the_same_question_also_retrieves_pages_that_share_a_word(demo_pages):
    # Given no provider / When the same question is asked / Then other pages come along
    passages = retrieve_passages(question="Who can send messages in a shared chat?", collection_ids=[demo_pages.id])
    assert _filenames(passages)[0] == "sharing.md"
    assert len(passages) > 1


def test_a_provider_failing_halfway_through_a_document_stores_none_of_its_vectors(
    local_embeddings, make_collection, upload, monkeypatch
):
    # Given a provider that embeds one text per call and fails on the second call
    real = LocalEmbedder.embed
    calls = []

    def second_fails(self, texts):
        calls.append(texts)
        if len(calls) == 2:
            raise EmbeddingError("The embedding server failed (HTTP 500).")
        return real(self, texts)

    monkeypatch.setattr("knowledge.embeddings.BATCH", 1)
    monkeypatch.setattr(LocalEmbedder, "embed", second_fails)
    collection = make_collection("Ops")

    # When a document of three chunks is ingested
    upload(collection.id, "long.md", "\n\n".join(f"Paragraph {n}: " + "backup words " * 40 for n in range(3)))

    # Then no vector is stored and every chunk stays pending, searchable by words
    assert Chunk.objects.filter(collection_id=collection.id).count() == 3
    assert not ChunkEmbedding.objects.exists()
    assert retrieve_passages(question="backup paragraph", collection_ids=[collection.id])


def test_for_a_reranker_the_search_keeps_the_pages_far_from_the_question_with_their_cosine(
    local_embeddings, demo_pages
):
    # Given the handbook, where "messages", "shared" and "chat" also appear on other pages
    question = "Who can send messages in a shared chat?"

    # When the search is made for a reranker to read next, and as for an answer directly
    for_reranker = hybrid_search(question=question, collection_ids=[demo_pages.id], limit=10, keep_far=True)
    direct = hybrid_search(question=question, collection_ids=[demo_pages.id], limit=10)

    # Then the reranker is given the far chunks too, each with its cosine, which the direct search drops
    assert len(for_reranker) > len(direct)
    assert {hit.chunk_id for hit in direct} < {hit.chunk_id for hit in for_reranker}
    assert all(hit.similarity is not None for hit in for_reranker)


def test_with_the_packaged_reranker_an_answer_still_cites_only_the_page_about_the_question(
    local_embeddings, local_reranker, demo_pages, ask, make_chat
):
    # Given the handbook and both packaged models
    chat = make_chat(demo_pages)

    # When someone asks who can send messages in a shared chat
    response = ask(chat.id, "Who can send messages in a shared chat?")

    # Then only the sharing page is cited, though the reranker read the pages that share a word too
    assert response.status_code == 201, response.content
    assert [citation["document_name"] for citation in response.json()["answer"]["citations"]] == ["sharing.md"]


def test_with_the_packaged_reranker_a_question_no_page_answers_still_finds_nothing(
    local_embeddings, local_reranker, demo_pages, ask, make_chat
):
    # Given the handbook, which says nothing of backups, and both packaged models
    chat = make_chat(demo_pages)

    # When someone asks how long database backups are kept
    response = ask(chat.id, "How long are database backups kept?")

    # Then the answer still says the documents do not cover it
    assert response.json()["answer"]["content"] == NOTHING_FOUND
