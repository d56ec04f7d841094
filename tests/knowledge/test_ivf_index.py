"""The IVF index of large search scopes (knowledge/search/ivf.py) and the BM25 ranking of the lexical
index: the index answers as exact search does, follows every change of the chunks, never reaches
outside the question's collections, and the words of a question count by how rare they are."""

from __future__ import annotations

import numpy as np
import pytest

from collab.actor import Actor
from knowledge.answers import retrieve_passages
from knowledge.embeddings import get_embedder
from knowledge.models import Chunk
from knowledge.search import dense, get_chunk_index, ivf
from knowledge.search.dense import Block, dense_search, exact_search, vector_cache
from knowledge.search.ivf import ivf_indexes
from knowledge.services import document_delete

pytestmark = pytest.mark.django_db

DIMENSIONS = 32
BACKUPS = "# Backups\n\nDatabase backups are kept for thirty days, then deleted."
RUNBOOK = "# Runbook\n\nWhen requests time out, first check the database connection pool."
GARDEN = "# Garden\n\nThe tomatoes in the greenhouse need water every morning."
OTHER_WORDS = "how long do we retain snapshots"


def _clustered_block(collection_id: str, *, clusters: int, each: int, seed: int) -> Block:
    """`clusters` tight groups of `each` unit vectors around random centres, ids `<collection>-<n>`."""
    random = np.random.default_rng(seed)
    centres = random.standard_normal((clusters, DIMENSIONS))
    rows = np.repeat(centres, each, axis=0) + 0.3 * random.standard_normal((clusters * each, DIMENSIONS))
    matrix = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    ids = np.array([f"{collection_id}-{row}" for row in range(len(matrix))], dtype=object)
    return Block(
        chunk_ids=ids,
        matrix=matrix,
        drops=0,
        last_id=len(ids),
        row_of={chunk_id: row for row, chunk_id in enumerate(ids)},
        collection_id=collection_id,
    )


@pytest.fixture
def small_lists(monkeypatch):
    """Lists of 16 vectors and a fifth of them probed, so a few hundred vectors make many lists."""
    monkeypatch.setattr(ivf, "VECTORS_PER_LIST", 16)
    monkeypatch.setattr(ivf, "MIN_PROBES", 2)
    ivf_indexes.clear()
    yield
    ivf_indexes.clear()


@pytest.fixture
def index_everything(settings, local_embeddings, small_lists, monkeypatch):
    """Every scope searched through its IVF index: exact search would fail the test."""
    settings.WORKSPACE_EMBEDDINGS_IVF_MIN_VECTORS = 1

    def refuse(**kwargs):
        raise AssertionError("exact search was used under the IVF threshold")

    monkeypatch.setattr(dense, "exact_search", refuse)


def _names(hits) -> set[str]:
    return set(Chunk.objects.filter(pk__in=[hit.chunk_id for hit in hits]).values_list("document__filename", flat=True))


def test_the_ivf_index_finds_what_exact_search_finds_on_clustered_vectors(small_lists):
    # Given two collections of 24 clusters of 20 vectors each (480 vectors, 30 lists, 6 probed)
    blocks = [
        _clustered_block("a", clusters=12, each=20, seed=1),
        _clustered_block("b", clusters=12, each=20, seed=2),
    ]
    questions = np.concatenate([blocks[0].matrix[::37], blocks[1].matrix[::41]])

    for question in questions:
        # When a question is searched through the index (threshold lowered) and exactly
        through_index = dense_search(vector=question, blocks=blocks, limit=10, min_similarity=-1, ivf_min_vectors=1)
        exact = exact_search(vector=question, blocks=blocks, limit=10, min_similarity=-1)

        # Then both return the same chunks in the same order, with the same scores
        assert [hit.chunk_id for hit in through_index] == [hit.chunk_id for hit in exact]
        assert np.allclose([hit.score for hit in through_index], [hit.score for hit in exact], atol=1e-5)
    index = ivf_indexes.current(model="", blocks=blocks)
    assert index.lists == 30
    assert index.probes() == 6


def test_under_the_threshold_search_stays_exact(small_lists, monkeypatch):
    # Given a scope of 480 vectors and the index refusing to be used
    blocks = [_clustered_block("a", clusters=24, each=20, seed=3)]

    def refuse(**kwargs):
        raise AssertionError("the IVF index was used under its threshold")

    monkeypatch.setattr(dense, "ivf_search", refuse)

    # When the threshold is above the scope's size, or the index is turned off (0)
    for threshold in (481, 0):
        hits = dense_search(
            vector=blocks[0].matrix[0], blocks=blocks, limit=5, min_similarity=-1, ivf_min_vectors=threshold
        )

        # Then the search is exact
        assert hits[0].chunk_id == "a-0"


def test_the_ivf_index_follows_uploads_reuploads_and_deletes(index_everything, make_collection, upload):
    # Given a collection searched once through its index
    collection = make_collection("Ops")
    upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")
    embedder = get_embedder()
    vector = embedder.embed([OTHER_WORDS])[0]

    def found() -> set[str]:
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=[collection.id])
        return _names(dense_search(vector=vector, blocks=blocks, limit=10, min_similarity=-1, model=embedder.model))

    assert found() == {"backups.md"}

    # When documents are added / Then the next search finds them
    upload(collection.id, "runbook.md", RUNBOOK, content_type="text/markdown")
    upload(collection.id, "garden.md", GARDEN, content_type="text/markdown")
    assert found() == {"backups.md", "runbook.md", "garden.md"}

    # When a document is uploaded again / Then only its new chunk is found, never the replaced one
    upload(collection.id, "garden.md", "# Garden\n\nThe roses want pruning.", content_type="text/markdown")
    blocks = vector_cache.blocks(model=embedder.model, collection_ids=[collection.id])
    hits = dense_search(vector=vector, blocks=blocks, limit=10, min_similarity=-1, model=embedder.model)
    assert {hit.chunk_id for hit in hits} == set(
        Chunk.objects.filter(collection=collection).values_list("pk", flat=True)
    )

    # When a document is deleted / Then the next search no longer finds it
    document_delete(document_id=collection.documents.get(filename="runbook.md").id, actor=Actor("alice"))
    assert found() == {"backups.md", "garden.md"}


def test_a_scope_index_never_returns_a_chunk_of_a_collection_outside_the_scope(
    index_everything, make_collection, upload
):
    # Given two collections, and a question about the first one searched over both through an index
    ops, garden = make_collection("Ops"), make_collection("Garden")
    upload(ops.id, "backups.md", BACKUPS, content_type="text/markdown")
    upload(garden.id, "garden.md", GARDEN, content_type="text/markdown")
    upload(garden.id, "runbook.md", RUNBOOK, content_type="text/markdown")
    embedder = get_embedder()
    vector = embedder.embed([OTHER_WORDS])[0]

    def search(scope: list[str]) -> list:
        blocks = vector_cache.blocks(model=embedder.model, collection_ids=scope)
        return dense_search(vector=vector, blocks=blocks, limit=10, min_similarity=-1, model=embedder.model)

    assert _names(search([ops.id, garden.id]))
    assert "backups.md" in _names(search([ops.id, garden.id])[:1])

    # When the same question is asked of the second collection alone, with no similarity floor
    hits = search([garden.id])

    # Then every chunk of it is found and nothing of the first collection, however near in meaning
    assert {hit.chunk_id for hit in hits} == set(Chunk.objects.filter(collection=garden).values_list("pk", flat=True))
    assert retrieve_passages(question="database backups", collection_ids=[garden.id])[0].collection_id == garden.id


def test_a_warm_question_through_the_ivf_index_costs_three_queries(
    index_everything, make_collection, upload, django_assert_max_num_queries
):
    # Given a collection asked once, so its vectors and its index are built
    collection = make_collection("Ops")
    upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")
    upload(collection.id, "runbook.md", RUNBOOK, content_type="text/markdown")
    retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id])

    # When it is asked again / Then the words, the freshness check and the passages are all it reads
    with django_assert_max_num_queries(3):
        passages = retrieve_passages(question=OTHER_WORDS, collection_ids=[collection.id])
    assert passages[0].document_name == "backups.md"


def test_the_lexical_ranking_puts_a_rare_word_ahead_of_a_common_word_said_often(make_collection, upload):
    # Given many chunks that say "pipeline", one saying it again and again, and one naming "zeppelin" once
    collection = make_collection("Words")
    for number in range(8):
        upload(
            collection.id,
            f"pipeline-{number}.md",
            f"# Note {number}\n\nThe pipeline ran on day {number}.",
            content_type="text/markdown",
        )
    upload(
        collection.id,
        "often.md",
        "# Often\n\nPipeline pipeline pipeline: the pipeline feeds the pipeline.",
        content_type="text/markdown",
    )
    upload(collection.id, "rare.md", "# Rare\n\nA zeppelin flew over the pipeline yard.", content_type="text/markdown")

    # When a question names both words (on PostgreSQL this is the BM25 ranking of the SQL query)
    hits = get_chunk_index().search(question="zeppelin pipeline", collection_ids=[collection.id], limit=5)

    # Then the chunk with the rare word ranks first
    first = Chunk.objects.get(pk=hits[0].chunk_id)
    assert first.document.filename == "rare.md"


def test_the_lexical_ranking_counts_how_rare_a_word_is_within_the_question_s_collections_only(make_collection, upload):
    # Given "zeppelin" said everywhere in another collection, and rare in this one
    other, mine = make_collection("Airships"), make_collection("Mine")
    for number in range(6):
        upload(other.id, f"airship-{number}.md", f"# Airship {number}\n\nThe zeppelin number {number} landed.")
    for number in range(6):
        upload(
            mine.id,
            f"pipeline-{number}.md",
            f"# Note {number}\n\nThe pipeline ran on day {number}.",
            content_type="text/markdown",
        )
    upload(
        mine.id,
        "often.md",
        "# Often\n\nPipeline pipeline pipeline: the pipeline feeds the pipeline.",
        content_type="text/markdown",
    )
    upload(mine.id, "rare.md", "# Rare\n\nA zeppelin flew over the pipeline yard.", content_type="text/markdown")

    # When the question is asked of this collection
    hits = get_chunk_index().search(question="zeppelin pipeline", collection_ids=[mine.id], limit=5)

    # Then the rare word still leads, and nothing of the other collection is returned
    chunks = Chunk.objects.filter(pk__in=[hit.chunk_id for hit in hits])
    assert {chunk.collection_id for chunk in chunks} == {mine.id}
    assert Chunk.objects.get(pk=hits[0].chunk_id).document.filename == "rare.md"


def test_after_rows_are_deleted_and_added_the_ivf_index_still_answers_like_exact_search(small_lists):
    # Given a scope searched once through its index
    whole = _clustered_block("a", clusters=24, each=20, seed=4)
    dense_search(vector=whole.matrix[0], blocks=[whole], limit=10, min_similarity=-1, ivf_min_vectors=1)

    # When a third of its rows go (a delete: drops counts up) and rows of new clusters arrive
    fresh = _clustered_block("a", clusters=6, each=20, seed=5)
    kept = np.arange(len(whole.chunk_ids)) % 3 != 0
    changed = Block(
        chunk_ids=np.concatenate([whole.chunk_ids[kept], np.array([f"new-{n}" for n in range(120)], dtype=object)]),
        matrix=np.concatenate([whole.matrix[kept], fresh.matrix]),
        drops=1,
        last_id=whole.last_id + 120,
        row_of={},
        collection_id="a",
    )

    # Then the index is brought up to date: it answers as exact search does, old rows and new
    for question in (changed.matrix[1], changed.matrix[-1], changed.matrix[200]):
        through_index = dense_search(vector=question, blocks=[changed], limit=10, min_similarity=-1, ivf_min_vectors=1)
        exact = exact_search(vector=question, blocks=[changed], limit=10, min_similarity=-1)
        assert [hit.chunk_id for hit in through_index] == [hit.chunk_id for hit in exact]
    index = ivf_indexes.current(model="", blocks=[changed])
    assert set(index.chunk_ids.tolist()) == set(changed.chunk_ids.tolist())
