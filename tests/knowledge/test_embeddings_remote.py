"""Embeddings from an OpenAI-compatible /v1/embeddings endpoint: the local test server on loopback,
and a real server where WORKSPACE_LLM_TEST_BASE_URL and WORKSPACE_LLM_TEST_EMBEDDINGS_MODEL name one."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from knowledge.answers import retrieve_passages
from knowledge.embeddings import EmbeddingError, check_embedding_settings, get_embedder
from knowledge.ingest import embeddings_backfill
from knowledge.models import Chunk, ChunkEmbedding
from tests.fixtures.llm import (
    EMBEDDINGS_PATH,
    REAL_SERVER_SKIP,
    TEST_API_KEY,
    Garbage,
    Hang,
    HttpError,
    RateLimited,
    Reply,
)

pytestmark = pytest.mark.django_db

BACKUPS = "Database backups are kept for thirty days, then deleted."
RUNBOOK = "When requests time out, first check the connection pool."


@pytest.fixture(params=["test-server", "real-server"])
def any_embeddings_provider(request, settings):
    """The test server, then a real one where the environment names it and an embedding model."""
    if request.param == "test-server":
        return request.getfixturevalue("remote_embeddings")
    base_url = os.environ.get("WORKSPACE_LLM_TEST_BASE_URL", "")
    model = os.environ.get("WORKSPACE_LLM_TEST_EMBEDDINGS_MODEL", "")
    if not base_url:
        pytest.skip(REAL_SERVER_SKIP)
    if not model:
        pytest.skip("WORKSPACE_LLM_TEST_EMBEDDINGS_MODEL does not name an embedding model of the real server")
    settings.WORKSPACE_EMBEDDINGS_PATH = ""
    settings.WORKSPACE_EMBEDDINGS_BASE_URL = base_url
    settings.WORKSPACE_EMBEDDINGS_MODEL = model
    settings.WORKSPACE_EMBEDDINGS_API_KEY = os.environ.get("WORKSPACE_LLM_TEST_API_KEY", "")
    settings.WORKSPACE_EMBEDDINGS_TIMEOUT_SECONDS = float(os.environ.get("WORKSPACE_LLM_TEST_TIMEOUT", "120"))
    return None


def _embedding_requests(server):
    return [request for request in server.requests if request.path == EMBEDDINGS_PATH]


def test_texts_come_back_as_one_unit_vector_each_in_order(any_embeddings_provider):
    # Given an embeddings endpoint
    embedder = get_embedder()

    # When three texts are embedded
    vectors = embedder.embed(["backups are kept", "the connection pool", "backups are kept"])

    # Then there is one unit vector per text, and equal texts get equal vectors
    assert vectors.shape[0] == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert np.allclose(vectors[0], vectors[2], atol=1e-4)


def test_the_request_names_the_model_the_texts_and_the_key(remote_embeddings):
    # Given the test server
    # When two texts are embedded
    get_embedder().embed(["one", "two"])

    # Then it was asked for floats of the configured model, with the key as a bearer token
    [request] = _embedding_requests(remote_embeddings)
    assert request.body == {"model": "test-embed", "input": ["one", "two"], "encoding_format": "float"}
    assert request.headers["authorization"] == f"Bearer {TEST_API_KEY}"


def test_ingest_stores_the_endpoints_vectors_under_its_model(remote_embeddings, make_collection, upload):
    # Given the endpoint
    collection = make_collection("Ops")

    # When a document is uploaded
    upload(collection.id, "backups.txt", BACKUPS)

    # Then its chunk has a vector under the endpoint's model, and dense retrieval finds it
    assert list(ChunkEmbedding.objects.values_list("model", flat=True)) == ["openai:test-embed"]
    passages = retrieve_passages(question="thirty days kept backups", collection_ids=[collection.id])
    assert passages[0].document_name == "backups.txt"


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (HttpError(500), "The embedding server failed (HTTP 500)."),
        (RateLimited(retry_after=7), "The embedding server is rate-limiting requests and asks to wait 7 seconds."),
        (HttpError(401, "bad key"), "The embedding server refused the configured API key."),
        (Garbage(), "The embedding server sent something that is not a chat-completions answer."),
        (Reply("not vectors"), "The embedding server answered with something other than one vector per text."),
        (Hang(), "The embedding server did not answer within 1 seconds."),
    ],
)
def test_every_failure_is_one_readable_reason(remote_embeddings, failure, reason):
    # Given an endpoint that fails
    remote_embeddings.push(failure, path=EMBEDDINGS_PATH)

    # When a text is embedded / Then the reason is one sentence
    with pytest.raises(EmbeddingError) as raised:
        get_embedder().embed(["anything"])
    assert str(raised.value) == reason


def test_too_few_vectors_are_refused(remote_embeddings):
    # Given an endpoint that answers one vector for two texts
    remote_embeddings.push(
        Garbage(body=b'{"object": "list", "data": [{"index": 0, "embedding": [1, 0]}]}'), path=EMBEDDINGS_PATH
    )

    # When two texts are embedded / Then nothing is stored from it
    with pytest.raises(EmbeddingError, match="one vector per text"):
        get_embedder().embed(["one", "two"])


def test_vectors_that_are_not_finite_numbers_are_refused(remote_embeddings):
    # Given an endpoint that answers NaN
    remote_embeddings.push(
        Garbage(body=b'{"object": "list", "data": [{"index": 0, "embedding": [NaN, 1]}]}'), path=EMBEDDINGS_PATH
    )

    # When a text is embedded / Then it is refused
    with pytest.raises(EmbeddingError, match="one vector per text"):
        get_embedder().embed(["one"])


def test_an_endpoint_down_at_ingest_leaves_chunks_pending_and_the_backfill_embeds_them(
    remote_embeddings, make_collection, upload
):
    # Given an endpoint that fails while a document is ingested
    collection = make_collection("Ops")
    remote_embeddings.push(HttpError(503), path=EMBEDDINGS_PATH)
    upload(collection.id, "backups.txt", BACKUPS)

    # Then the document is ready, found by words, its chunk pending
    assert collection.documents.get().status == "ready"
    assert not ChunkEmbedding.objects.exists()
    assert retrieve_passages(question="database backups", collection_ids=[collection.id])

    # When the worker's backfill runs with the endpoint back / Then the chunk is embedded
    assert embeddings_backfill() == {"embedded": 1, "pending": 0}
    assert ChunkEmbedding.objects.get().chunk_id == Chunk.objects.get().pk


def test_a_question_while_the_endpoint_hangs_is_answered_by_words(
    remote_embeddings, make_collection, upload, make_chat, ask
):
    # Given an embedded collection and a chat over it
    collection = make_collection("Ops")
    upload(collection.id, "backups.txt", BACKUPS)
    upload(collection.id, "runbook.txt", RUNBOOK)
    chat = make_chat(collection)

    # When the endpoint hangs while a question is asked
    remote_embeddings.push(Hang(), path=EMBEDDINGS_PATH)
    response = ask(chat.id, "How long are database backups kept?")

    # Then the answer still quotes the passage, found by words
    assert response.status_code == 201
    assert "thirty days" in response.json()["answer"]["content"]


def test_the_key_is_never_logged_or_in_a_reason(remote_embeddings, caplog):
    # Given an endpoint that refuses, echoing the key in its message
    caplog.set_level(logging.DEBUG)
    remote_embeddings.push(HttpError(400, f"bad request with {TEST_API_KEY}"), path=EMBEDDINGS_PATH)

    # When a text is embedded
    with pytest.raises(EmbeddingError) as raised:
        get_embedder().embed(["anything"])

    # Then neither the reason nor any log line carries the key
    assert TEST_API_KEY not in str(raised.value)
    assert TEST_API_KEY not in repr(get_embedder())
    assert all(TEST_API_KEY not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("base_url", ["ftp://example.org/v1", "127.0.0.1:11434"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(settings, base_url):
    # Given an address that is not http(s)
    settings.WORKSPACE_EMBEDDINGS_BASE_URL = base_url
    settings.WORKSPACE_EMBEDDINGS_MODEL = "m"

    # When the provider is built / Then the setting is named
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_EMBEDDINGS_BASE_URL"):
        get_embedder()


def test_an_endpoint_without_a_model_is_refused(settings):
    # Given an endpoint and no model
    settings.WORKSPACE_EMBEDDINGS_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.WORKSPACE_EMBEDDINGS_MODEL = ""

    # When the provider is built / Then the missing setting is named
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_EMBEDDINGS_MODEL"):
        get_embedder()


def test_a_bad_embedding_setting_stops_the_start_up(settings):
    # Given an endpoint without a model
    settings.WORKSPACE_EMBEDDINGS_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.WORKSPACE_EMBEDDINGS_MODEL = ""

    # When the app's start-up check runs / Then it refuses, naming the setting
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_EMBEDDINGS_MODEL"):
        check_embedding_settings()
