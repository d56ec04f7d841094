"""Reranking (issue 45 point 2): a `/rerank` endpoint the deployment names reorders the first
stage's best passages; without one, or when it fails, the first stage's order stands."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from knowledge.answers import retrieve_passages
from knowledge.rerank import check_rerank_settings
from tests.fixtures.llm import RERANK_PATH, Garbage, Hang, HttpError, Reply

DOCUMENTS = {
    "backups.md": "# Backup policy\n\nDatabase backups are kept for one year. Database backups run every night.",
    "restores.md": "# Restores\n\nA restore of the database from a backup takes about two hours.",
    "runbook.md": "# Slow requests\n\nCheck the database connection pool first.",
}
QUESTION = "How long are database backups kept?"


@pytest.fixture
def library(make_collection, upload):
    collection = make_collection("Operations")
    for filename, text in DOCUMENTS.items():
        upload(collection.id, filename, text, content_type="text/markdown")
    return collection


def _order(collection) -> list[str]:
    return [passage.document_name for passage in retrieve_passages(question=QUESTION, collection_ids=[collection.id])]


def _prefers_restores(query: str, text: str) -> float:
    return 1.0 if "restore" in text.lower() else 0.5 if "backup" in text.lower() else 0.0


def test_a_reranker_asks_the_passages_in_its_order(library, reranker):
    # Given a reranker that scores the restore page above the backup policy
    reranker.relevance = _prefers_restores

    # When a question is retrieved
    order = _order(library)

    # Then the reranker's order is the passages' order, and it read the question beside each passage
    assert order == ["restores.md", "backups.md", "runbook.md"]
    (request,) = [request for request in reranker.requests if request.path == RERANK_PATH]
    assert request.body["query"] == QUESTION
    assert request.body["model"] == "test-rerank"
    assert sorted(document.split("\n\n")[0] for document in request.body["documents"]) == [
        "Backup policy",
        "Restores",
        "Slow requests",
    ]


def test_without_a_reranker_the_first_stages_order_stands(library, llm_server, settings):
    # Given no reranker configured
    settings.WORKSPACE_RERANK_BASE_URL = ""

    # When a question is retrieved / Then the words decide, and nobody was asked to rerank
    assert _order(library)[0] == "backups.md"
    assert not [request for request in llm_server.requests if request.path == RERANK_PATH]


def test_only_the_first_depth_passages_are_reranked(library, reranker, settings):
    # Given a reranker that prefers the restore page, reading the first two passages only
    reranker.relevance = _prefers_restores
    settings.WORKSPACE_RERANK_DEPTH = 2
    first_stage = _first_stage_order(library, settings)

    # When a question is retrieved
    order = _order(library)

    # Then the first two are in the reranker's order and the third stays where it was
    (request,) = [request for request in reranker.requests if request.path == RERANK_PATH]
    assert len(request.body["documents"]) == 2
    assert order[2] == first_stage[2]
    assert sorted(order[:2]) == sorted(first_stage[:2])


def _first_stage_order(collection, settings) -> list[str]:
    saved = settings.WORKSPACE_RERANK_BASE_URL
    settings.WORKSPACE_RERANK_BASE_URL = ""
    try:
        return _order(collection)
    finally:
        settings.WORKSPACE_RERANK_BASE_URL = saved


@pytest.mark.parametrize(
    "failure",
    [
        HttpError(500, "reranker down"),
        Garbage(),
        Garbage(body=b'{"results": [{"index": 0, "relevance_score": 1.0}]}'),
        Garbage(body=b'{"results": [{"index": 0, "relevance_score": NaN}, {"index": 1, "relevance_score": 1}]}'),
        Reply("not a rerank answer"),
        Garbage(body=b"[" * 100_000),
        Garbage(body=b'{"results": [' + b'{"index": 0, "relevance_score": 1}, ' * 40_000 + b"{}]}"),
        Hang(),
    ],
    ids=[
        "500",
        "not json",
        "a score missing",
        "not a number",
        "another protocol",
        "nested deep",
        "too large",
        "a hang",
    ],
)
def test_a_failing_reranker_leaves_the_first_stages_order_and_says_so_in_the_log(
    library, reranker, settings, caplog, failure
):
    # Given a reranker that fails in one of the ways a server can
    first_stage = _first_stage_order(library, settings)
    reranker.relevance = _prefers_restores
    reranker.push(failure, path=RERANK_PATH)

    # When a question is retrieved
    with caplog.at_level(logging.WARNING, logger="knowledge.rerank"):
        order = _order(library)

    # Then the first stage's order stands, and one warning says why
    assert order == first_stage
    (warning,) = [record for record in caplog.records if record.name == "knowledge.rerank"]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("reranking skipped, the first stage's order kept: The reranker")


def test_a_question_asked_while_the_reranker_fails_is_answered(library, reranker, make_chat, ask):
    # Given a chat over the library and a reranker that answers 500
    reranker.push(HttpError(500, "reranker down"), path=RERANK_PATH)
    chat = make_chat(library)

    # When alice asks through the API / Then she gets her answer, citing the backup policy first
    response = ask(chat.id, QUESTION)
    assert response.status_code == 201
    assert response.json()["answer"]["citations"][0]["document_name"] == "backups.md"


def test_the_key_goes_to_the_reranker_in_its_authorization_header(library, reranker, settings):
    # Given a reranker that needs a key
    settings.WORKSPACE_RERANK_API_KEY = "rerank-secret"

    # When a question is retrieved / Then the reranker got the key as a bearer token
    _order(library)
    (request,) = [request for request in reranker.requests if request.path == RERANK_PATH]
    assert request.headers["authorization"] == "Bearer rerank-secret"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_RERANK_BASE_URL", "ftp://reranker.example"),
        ("WORKSPACE_RERANK_BASE_URL", "reranker:8080"),
        ("WORKSPACE_RERANK_TIMEOUT_SECONDS", 0),
        ("WORKSPACE_RERANK_DEPTH", 0),
    ],
)
def test_a_reranker_setting_that_cannot_work_stops_the_start(settings, name, value):
    # Given a setting no reranker can work with
    setattr(settings, name, value)

    # When the service starts / Then it refuses, naming the setting
    with pytest.raises(ImproperlyConfigured, match=name):
        check_rerank_settings()
