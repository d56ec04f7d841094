"""Reranking (issue 45 point 2): a `/rerank` endpoint the deployment names, or the packaged
cross-encoder, reorders the first stage's best passages; without one, or when it fails, the first
stage's order stands."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from knowledge.answers import NOTHING_FOUND, retrieve_passages
from knowledge.rerank import LocalReranker, check_rerank_settings, packaged_reranker_path
from tests.fixtures.llm import RERANK_PATH, Garbage, Hang, HttpError, Reply

DOCUMENTS = {
    "backups.md": "# Backup policy\n\nDatabase backups are kept for one year. Database backups run every night.",
    "restores.md": "# Restores\n\nA restore of the database from a backup takes about two hours.",
    "runbook.md": "# Slow requests\n\nCheck the database connection pool first.",
}
QUESTION = "How long are database backups kept?"


def _collection_of(make_collection, upload, name: str, documents: dict[str, str]):
    collection = make_collection(name)
    for filename, text in documents.items():
        upload(collection.id, filename, text, content_type="text/markdown")
    return collection


@pytest.fixture
def library(make_collection, upload):
    return _collection_of(make_collection, upload, "Operations", DOCUMENTS)


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
    saved = settings.WORKSPACE_RERANK_BASE_URL, settings.WORKSPACE_RERANK_PATH
    settings.WORKSPACE_RERANK_BASE_URL = settings.WORKSPACE_RERANK_PATH = ""
    try:
        return _order(collection)
    finally:
        settings.WORKSPACE_RERANK_BASE_URL, settings.WORKSPACE_RERANK_PATH = saved


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


# The packaged cross-encoder (issue 45 point 2): read from disk, run by ONNX Runtime.

ANSWERS_IN_OTHER_WORDS = {
    "backups.md": "# Backup policy\n\nDatabase backups run every night at 02:00 on the database servers, "
    "and database backup jobs are watched by the operations team.",
    "retention.md": "# Retention\n\nSnapshots of the database are retained for twelve months, then deleted.",
    "runbook.md": "# Slow requests\n\nCheck the database connection pool first.",
}


@pytest.fixture
def reworded_library(make_collection, upload):
    return _collection_of(make_collection, upload, "Operations, reworded", ANSWERS_IN_OTHER_WORDS)


def test_the_packaged_cross_encoder_puts_the_passage_that_answers_before_one_that_only_shares_its_words(
    reworded_library, local_reranker, settings
):
    # Given a page that repeats "database backups" without saying how long they are kept, and one
    # that answers in other words (snapshots retained for twelve months)
    first_stage = _first_stage_order(reworded_library, settings)
    assert first_stage[0] == "backups.md"

    # When the question is retrieved with the packaged reranker
    order = _order(reworded_library)

    # Then the page that answers comes first
    assert order[0] == "retention.md"


def test_the_packaged_cross_encoder_scores_each_passage_in_the_order_given(local_reranker):
    # Given the packaged cross-encoder and passages of very different lengths
    passages = [
        "Check the database connection pool first. " * 40,
        "Snapshots of the database are retained for twelve months, then deleted.",
        "The canteen opens at noon.",
    ]

    # When it scores them
    scores = LocalReranker(local_reranker, max_tokens=256).scores(question=QUESTION, texts=passages)

    # Then there is one finite score per passage, in their order, the answer highest
    assert len(scores) == 3
    assert max(scores) == scores[1]


def test_a_reranker_endpoint_named_by_its_address_is_asked_rather_than_the_model_on_disk(
    library, reranker, local_reranker, settings
):
    # Given both an endpoint and a model directory configured
    settings.WORKSPACE_RERANK_BASE_URL = reranker.base_url
    reranker.relevance = _prefers_restores

    # When a question is retrieved / Then the endpoint's order is used
    assert _order(library)[0] == "restores.md"
    assert [request for request in reranker.requests if request.path == RERANK_PATH]


def test_a_model_file_that_cannot_be_read_leaves_the_first_stages_order_and_a_warning(
    library, settings, tmp_path, caplog
):
    # Given a reranker directory whose model file is not a model
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    (tmp_path / "tokenizer.json").write_text("{}")
    first_stage = _first_stage_order(library, settings)
    settings.WORKSPACE_RERANK_PATH = str(tmp_path)

    # When a question is retrieved
    with caplog.at_level(logging.WARNING, logger="knowledge.rerank"):
        order = _order(library)

    # Then the first stage's order stands, and the warning names the failure without a traceback
    assert order == first_stage
    (warning,) = [record for record in caplog.records if record.name == "knowledge.rerank"]
    assert "The local reranker in" in warning.getMessage()
    assert warning.exc_info is None


def test_a_question_asked_while_the_local_reranker_cannot_load_is_answered(library, settings, tmp_path, make_chat, ask):
    # Given a broken reranker model and a chat over the library
    (tmp_path / "model.onnx").write_bytes(b"\x00" * 64)
    (tmp_path / "tokenizer.json").write_text("{}")
    settings.WORKSPACE_RERANK_PATH = str(tmp_path)
    chat = make_chat(library)

    # When alice asks / Then she is answered from the first stage's order
    response = ask(chat.id, QUESTION)
    assert response.status_code == 201
    assert response.json()["answer"]["citations"][0]["document_name"] == "backups.md"


def test_without_the_package_no_packaged_reranker_is_found(monkeypatch):
    # Given the package that ships the cross-encoder is not installed
    monkeypatch.setattr("knowledge.rerank.PACKAGED_RERANKER", ("no_such_package_here", "models/data/reranker_en"))

    # When the packaged reranker is looked for / Then there is none (and retrieval runs without one)
    assert packaged_reranker_path() == ""


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_RERANK_MAX_TOKENS", 0),
        ("WORKSPACE_RERANK_MAX_TOKENS", 4096),
        ("WORKSPACE_RERANK_MIN_SCORE", float("nan")),
        ("WORKSPACE_RERANK_MIN_SCORE", float("-inf")),
    ],
)
def test_a_token_bound_or_floor_no_cross_encoder_can_use_stops_the_start(settings, name, value):
    # Given a bound on the tokens read, or a floor, that is no use to a cross-encoder
    setattr(settings, name, value)

    # When the service starts / Then it refuses, naming the setting
    with pytest.raises(ImproperlyConfigured, match=name):
        check_rerank_settings()


def test_a_model_directory_without_a_model_stops_the_start(settings, tmp_path):
    # Given a reranker directory that holds no model
    (tmp_path / "tokenizer.json").write_text("{}")
    settings.WORKSPACE_RERANK_PATH = str(tmp_path)

    # When the service starts / Then it refuses, naming the setting and the missing file
    with pytest.raises(ImproperlyConfigured, match=r"WORKSPACE_RERANK_PATH .* no model\.onnx"):
        check_rerank_settings()


def test_a_passage_of_merged_chunks_is_read_one_chunk_at_a_time_and_scores_as_its_best(
    make_collection, upload, reranker
):
    # Given a backup policy long enough to be two chunks of one section, whose second chunk says how
    # long backups are kept, and a short restore page
    collection = make_collection("Long policy")
    filler = " ".join(f"Database backups are checked by job {n} every night." for n in range(14))
    upload(
        collection.id,
        "policy.md",
        f"# Backup policy\n\n{filler}\n\nDatabase backups are kept for one year, then deleted.",
        content_type="text/markdown",
    )
    upload(
        collection.id,
        "restores.md",
        "# Restores\n\nA restore from backup takes two hours.",
        content_type="text/markdown",
    )
    reranker.relevance = lambda query, text: 2.0 if "one year" in text else 1.0 if "restore" in text.lower() else 0.0

    # When the question is retrieved
    passages = retrieve_passages(question=QUESTION, collection_ids=[collection.id])

    # Then the reranker read each chunk on its own, after its section's heading, and the policy
    # (its best chunk answers) comes first with that chunk's score
    (request,) = [request for request in reranker.requests if request.path == RERANK_PATH]
    policy = next(passage for passage in passages if passage.document_name == "policy.md")
    assert len(policy.chunk_ids) == 2
    assert len(request.body["documents"]) == 3
    assert all(document.startswith(("Backup policy\n\n", "Restores\n\n")) for document in request.body["documents"])
    assert [passage.document_name for passage in passages] == ["policy.md", "restores.md"]
    assert [passage.relevance for passage in passages] == [2.0, 1.0]


def test_without_a_reranker_no_passage_has_a_relevance(library, settings):
    # Given no reranker / When a question is retrieved / Then no passage claims a reranker's score
    settings.WORKSPACE_RERANK_BASE_URL = settings.WORKSPACE_RERANK_PATH = ""
    assert [passage.relevance for passage in retrieve_passages(question=QUESTION, collection_ids=[library.id])] == [
        None
    ] * 3


def test_with_a_floor_passages_the_reranker_scores_under_it_are_not_answered_from(library, reranker, settings):
    # Given a floor of 0.5 and a reranker that scores only the backup policy above it
    settings.WORKSPACE_RERANK_MIN_SCORE = 0.5
    reranker.relevance = lambda query, text: 0.9 if "kept for one year" in text else 0.1

    # When the question is retrieved / Then only the backup policy is left
    assert _order(library) == ["backups.md"]


def test_a_question_no_passage_reaches_the_floor_for_is_answered_nothing_found(
    library, reranker, settings, make_chat, ask
):
    # Given a floor no passage reaches for this question
    settings.WORKSPACE_RERANK_MIN_SCORE = 0.5
    reranker.relevance = lambda query, text: 0.1
    chat = make_chat(library)

    # When alice asks / Then the answer says it found nothing and cites nothing
    response = ask(chat.id, "Which regions is the service deployed in?")
    assert response.status_code == 201
    assert response.json()["answer"]["citations"] == []
    assert response.json()["answer"]["content"] == NOTHING_FOUND


def test_a_floor_is_not_applied_when_the_reranker_fails(library, reranker, settings, caplog):
    # Given a floor and a reranker that answers 500
    settings.WORKSPACE_RERANK_MIN_SCORE = 0.5
    first_stage = _first_stage_order(library, settings)
    reranker.push(HttpError(500, "reranker down"), path=RERANK_PATH)

    # When a question is retrieved / Then the first stage's passages are all still there
    with caplog.at_level(logging.WARNING, logger="knowledge.rerank"):
        assert _order(library) == first_stage


@pytest.mark.parametrize(("restores_score", "cited"), [(8.0, True), (5.0, False)])
def test_a_passage_the_reranker_scores_far_below_the_best_is_not_quoted_beside_it(
    library, reranker, make_chat, ask, restores_score, cited
):
    # Given a reranker that scores the backup policy 9 and the restore page close to it, or more
    # than three below
    reranker.relevance = lambda query, text: 9.0 if "kept for one year" in text else restores_score
    chat = make_chat(library)

    # When alice asks
    response = ask(chat.id, QUESTION)

    # Then the backup policy is [1], and the restore page is quoted beside it only when close
    names = [citation["document_name"] for citation in response.json()["answer"]["citations"]]
    assert names[0] == "backups.md"
    assert ("restores.md" in names) is cited


def test_a_question_longer_than_the_cross_encoder_reads_is_answered_and_reranked(
    reworded_library, local_reranker, make_chat, ask, caplog
):
    # Given a chat over the reworded library, with the packaged reranker reading 256 tokens
    chat = make_chat(reworded_library)
    question = "How long are database snapshots retained? " + "Please say exactly how long. " * 120

    # When alice asks a question of some 700 words (3,500 characters, within the 4,000 allowed)
    with caplog.at_level(logging.WARNING, logger="knowledge.rerank"):
        response = ask(chat.id, question)

    # Then she is answered, and the reranker read it (cut to its bound) rather than giving up
    assert response.status_code == 201, response.content
    assert not [record for record in caplog.records if record.name == "knowledge.rerank"]


NORMANDY = {
    "normans.md": "# The Normans\n\nThe Normans gave their name to Normandy, a region in the north of France.",
    "travel.md": "# Travel desk\n\nThe country you are located in decides which travel desk answers.",
}


@pytest.mark.parametrize(("normans_score", "cited"), [(4.0, ["normans.md"]), (-8.0, ["travel.md"])])
def test_the_rerankers_favourite_is_quoted_though_it_shares_few_of_the_questions_words(
    make_collection, upload, reranker, make_chat, ask, normans_score, cited
):
    # Given a paragraph that answers in other words (one word of the question) and one that shares
    # two words and answers nothing, the reranker scoring the paragraph that answers 4, or -8 (under
    # the bar that lets a favourite past the word rule), and the other -9
    collection = _collection_of(make_collection, upload, "Regions", NORMANDY)
    reranker.relevance = lambda query, text: normans_score if "Normans" in text else -9.0
    chat = make_chat(collection)

    # When alice asks
    response = ask(chat.id, "In what country is Normandy located?")

    # Then a favourite the reranker is sure of is quoted alone; one it doubts is dropped for its words
    assert [citation["document_name"] for citation in response.json()["answer"]["citations"]] == cited
