"""Renaming and deleting collections and chats, and copying a chat, over the API (docs/ARCHITECTURE.md §6):
writers rename a collection, only its creator deletes it; a chat is its owner's to rename and delete; a
reader may copy it. Deletes take the search-index rows along and never touch the citation log."""

from __future__ import annotations

import pytest

from knowledge.models import Chunk, CitationEvent, Collection, Document, KbChat, KbChatMessage, KbChatShare
from knowledge.search import get_chunk_index

pytestmark = pytest.mark.django_db


def _hits(question: str, collection_id: str) -> list:
    return get_chunk_index().search(question=question, collection_ids=[collection_id], limit=10)


def _answered_chat(handbook, make_chat, ask, *, readers: tuple[str, ...] = ()) -> KbChat:
    """Alice's chat over the handbook with one cited answer, shared with `readers`."""
    chat = make_chat(handbook, title="Quota questions")
    assert ask(chat.id, "How do I free capacity when a quota is hit?").status_code == 201
    for reader in readers:
        chat.shares.create(user_id=reader)
    return chat


# Collections


def test_a_writer_renames_a_collection_and_its_id_and_counts_stay(handbook, make_chat, ask, api_client_for):
    # Given alice's handbook, cited once, with bob added as a writer
    _answered_chat(handbook, make_chat, ask)
    api_client_for("alice").post(f"/kb/collections/{handbook.id}/writers", {"user_ids": ["bob"]}, format="json")
    cited_before = api_client_for("alice").get(f"/kb/collections/{handbook.id}").json()["cited"]

    # When bob renames it and changes its description
    response = api_client_for("bob").patch(
        f"/kb/collections/{handbook.id}", {"name": "Runbook", "description": "How we run"}, format="json"
    )

    # Then the same collection carries the new name and description, and its count is unchanged
    body = response.json()
    assert response.status_code == 200
    assert (body["id"], body["name"], body["description"]) == (handbook.id, "Runbook", "How we run")
    assert body["cited"] == cited_before >= 1
    assert Collection.objects.get(pk=handbook.id).updated_by == "bob"


def test_renaming_without_a_description_leaves_the_description(make_collection, alice_api):
    # Given alice's collection with a description
    collection = make_collection("Runbooks", description="How we operate")

    # When she renames it with a name only
    alice_api.patch(f"/kb/collections/{collection.id}", {"name": "Playbooks"}, format="json")

    # Then the description is still there
    assert Collection.objects.get(pk=collection.id).description == "How we operate"


def test_a_reader_cannot_rename_a_collection(make_collection, bob_api):
    # Given alice's collection, of which bob is no writer
    collection = make_collection("Runbooks")

    # When bob renames it
    response = bob_api.patch(f"/kb/collections/{collection.id}", {"name": "Bob's"}, format="json")

    # Then it is 403 not_a_writer and the name stays
    assert (response.status_code, response.json()["error"]) == (403, "not_a_writer")
    assert Collection.objects.get(pk=collection.id).name == "Runbooks"


@pytest.mark.parametrize(
    "body",
    [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 201}, {"name": "ok", "description": "d" * 5001}, ["name"]],
)
def test_a_bad_collection_rename_is_400_and_changes_nothing(make_collection, alice_api, body):
    # Given alice's collection
    collection = make_collection("Runbooks", description="How we operate")

    # When she sends a rename that is empty, blank, too long or not an object
    response = alice_api.patch(f"/kb/collections/{collection.id}", body, format="json")

    # Then it is 400 with an error code and a detail, and nothing changed
    assert response.status_code == 400
    assert {"error", "detail"} <= set(response.json())
    stored = Collection.objects.get(pk=collection.id)
    assert (stored.name, stored.description) == ("Runbooks", "How we operate")


def test_changing_a_missing_collection_is_404(alice_api):
    # Given no such collection
    # When alice reads, renames or deletes it
    responses = [
        alice_api.get("/kb/collections/col_missing"),
        alice_api.patch("/kb/collections/col_missing", {"name": "x"}, format="json"),
        alice_api.delete("/kb/collections/col_missing"),
    ]

    # Then each is 404
    assert [response.status_code for response in responses] == [404, 404, 404]


def test_the_creator_deletes_a_collection_with_its_documents_chunks_and_search_rows(handbook, alice_api):
    # Given alice's handbook, whose passages the search finds
    assert _hits("evicted quota", handbook.id)

    # When she deletes it
    response = alice_api.delete(f"/kb/collections/{handbook.id}")

    # Then the collection, its documents, its chunks and its search-index rows are gone
    assert response.status_code == 204
    assert not Collection.objects.filter(pk=handbook.id).exists()
    assert not Document.objects.exists()
    assert not Chunk.objects.exists()
    assert _hits("evicted quota", handbook.id) == []


def test_deleting_one_collection_leaves_the_search_rows_of_another(handbook, make_collection, upload, alice_api):
    # Given the handbook and a second collection that also talks about quotas
    other = make_collection("Other")
    upload(other.id, "limits.txt", "Every quota is evicted nowhere.")

    # When alice deletes the handbook
    alice_api.delete(f"/kb/collections/{handbook.id}")

    # Then the other collection is still found
    assert _hits("evicted quota", other.id)


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_only_the_creator_deletes_a_collection(handbook, api_client_for, who):
    # Given alice's handbook, with bob as a writer and carol a reader
    api_client_for("alice").post(f"/kb/collections/{handbook.id}/writers", {"user_ids": ["bob"]}, format="json")

    # When bob or carol deletes it
    response = api_client_for(who).delete(f"/kb/collections/{handbook.id}")

    # Then it is 403 not_collection_creator and everything stays
    assert (response.status_code, response.json()["error"]) == (403, "not_collection_creator")
    assert Document.objects.filter(collection_id=handbook.id).count() == 2
    assert _hits("evicted quota", handbook.id)


def test_deleting_a_collection_keeps_its_citation_history_and_the_chats_that_searched_it(
    handbook, make_chat, ask, alice_api
):
    # Given alice's chat with a cited answer over the handbook
    chat = _answered_chat(handbook, make_chat, ask)
    events = CitationEvent.objects.count()

    # When she deletes the handbook
    alice_api.delete(f"/kb/collections/{handbook.id}")

    # Then the chat keeps its transcript and searches nothing, and the citation log is untouched
    body = alice_api.get(f"/kb/chats/{chat.id}").json()
    assert body["collection_ids"] == []
    assert [message["role"] for message in body["messages"]] == ["user", "assistant"]
    assert body["messages"][1]["citations"]
    assert events >= 1
    assert CitationEvent.objects.count() == events


def test_a_collection_delete_that_fails_halfway_leaves_everything(handbook, alice_api, monkeypatch):
    # Given alice's handbook, indexed for search
    chunks, hits = Chunk.objects.count(), _hits("evicted quota", handbook.id)

    # When the delete dies after its documents, chunks and search rows went but before the collection did
    def crash(*args, **kwargs):
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(Collection, "delete", crash)
    with pytest.raises(RuntimeError):
        alice_api.delete(f"/kb/collections/{handbook.id}")

    # Then the transaction took it all back
    assert hits
    assert Document.objects.filter(collection_id=handbook.id).count() == 2
    assert Chunk.objects.count() == chunks
    assert _hits("evicted quota", handbook.id) == hits


def test_deleting_a_collection_costs_the_same_statements_for_many_documents(
    make_collection, upload, alice_api, django_assert_max_num_queries
):
    # Given alice's collection of twelve ingested documents
    collection = make_collection("Many")
    for number in range(12):
        upload(collection.id, f"note-{number}.txt", f"Note {number} about sandboxes.")

    # When she deletes it
    with django_assert_max_num_queries(15):
        response = alice_api.delete(f"/kb/collections/{collection.id}")

    # Then one statement per table did it, not one per document
    assert response.status_code == 204
    assert not Document.objects.exists()


# Chats


def test_the_owner_renames_a_chat(handbook, make_chat, alice_api):
    # Given alice's chat
    chat = make_chat(handbook, title="Questions")

    # When she renames it
    response = alice_api.patch(f"/kb/chats/{chat.id}", {"title": "Quota questions"}, format="json")

    # Then it carries the new title
    assert (response.status_code, response.json()["title"]) == (200, "Quota questions")
    assert KbChat.objects.get(pk=chat.id).title == "Quota questions"


@pytest.mark.parametrize("body", [{}, {"title": ""}, {"title": "  "}, {"title": "t" * 201}, ["title"]])
def test_a_bad_chat_rename_is_400_and_changes_nothing(handbook, make_chat, alice_api, body):
    # Given alice's chat
    chat = make_chat(handbook, title="Questions")

    # When she sends a title that is missing, blank, too long or not an object
    response = alice_api.patch(f"/kb/chats/{chat.id}", body, format="json")

    # Then it is 400 and the title stays
    assert response.status_code == 400
    assert KbChat.objects.get(pk=chat.id).title == "Questions"


def test_a_reader_cannot_rename_or_delete_a_chat(handbook, make_chat, ask, bob_api):
    # Given alice's answered chat shared with bob
    chat = _answered_chat(handbook, make_chat, ask, readers=("bob",))

    # When bob renames and deletes it
    rename = bob_api.patch(f"/kb/chats/{chat.id}", {"title": "Mine"}, format="json")
    delete = bob_api.delete(f"/kb/chats/{chat.id}")

    # Then both are 403 read_only_share and the chat is as it was
    assert (rename.status_code, delete.status_code) == (403, 403)
    assert rename.json()["error"] == delete.json()["error"] == "read_only_share"
    assert KbChat.objects.get(pk=chat.id).title == "Quota questions"
    assert KbChatMessage.objects.filter(chat_id=chat.id).count() == 2


def test_a_stranger_cannot_rename_delete_or_copy_a_chat_and_learns_nothing(handbook, make_chat, api_client_for):
    # Given alice's chat, not shared with dave
    chat = make_chat(handbook)
    dave = api_client_for("dave")

    # When dave renames, deletes and copies it
    responses = [
        dave.patch(f"/kb/chats/{chat.id}", {"title": "Mine"}, format="json"),
        dave.delete(f"/kb/chats/{chat.id}"),
        dave.post(f"/kb/chats/{chat.id}/copy", {}, format="json"),
    ]

    # Then each is 404, as for a chat that does not exist, and nothing changed or was made
    assert [response.status_code for response in responses] == [404, 404, 404]
    assert list(KbChat.objects.values_list("title", flat=True)) == ["Questions"]


def test_the_owner_deletes_a_chat_its_readers_lose_it_and_its_citations_stay_counted(
    handbook, make_chat, ask, alice_api, bob_api
):
    # Given alice's answered chat shared with bob, and the handbook's count
    chat = _answered_chat(handbook, make_chat, ask, readers=("bob",))
    cited = alice_api.get(f"/kb/collections/{handbook.id}").json()["cited"]

    # When she deletes it
    response = alice_api.delete(f"/kb/chats/{chat.id}")

    # Then the chat, its messages and its shares are gone, bob gets 404, and the count stays
    assert response.status_code == 204
    assert not KbChatMessage.objects.exists()
    assert not KbChatShare.objects.exists()
    assert bob_api.get(f"/kb/chats/{chat.id}").status_code == 404
    assert alice_api.get(f"/kb/collections/{handbook.id}").json()["cited"] == cited >= 1


# Copies


def test_a_reader_copies_a_chat_into_one_of_their_own_and_asks_there(handbook, make_chat, ask, bob_api):
    # Given alice's answered chat shared with bob
    chat = _answered_chat(handbook, make_chat, ask, readers=("bob",))

    # When bob copies it and asks in the copy
    response = bob_api.post(f"/kb/chats/{chat.id}/copy", {}, format="json")
    copy = response.json()
    asked = ask(copy["id"], "Who can read a shared chat?", user_id="bob")

    # Then the copy is bob's, unshared, over the same collections, with the same exchange (alice asked it),
    # and his question is answered there
    assert response.status_code == 201
    assert (copy["title"], copy["owner"], copy["shared_with"]) == ("Copy of Quota questions", "bob", [])
    assert copy["collection_ids"] == [handbook.id]
    assert [(m["role"], m["created_by"]) for m in copy["messages"]] == [("user", "alice"), ("assistant", "alice")]
    assert copy["messages"][1]["citations"] == KbChatMessage.objects.get(chat=chat, role="assistant").citations
    assert asked.status_code == 201


def test_copying_leaves_the_original_and_cites_nothing_anew(handbook, make_chat, ask, bob_api):
    # Given alice's answered chat shared with bob, and the citation log
    chat = _answered_chat(handbook, make_chat, ask, readers=("bob",))
    events = CitationEvent.objects.count()

    # When bob copies it
    bob_api.post(f"/kb/chats/{chat.id}/copy", {"title": "My quota notes"}, format="json")

    # Then the original keeps its owner, readers and messages, and no event was written
    original = KbChat.objects.get(pk=chat.id)
    assert (original.created_by, original.title) == ("alice", "Quota questions")
    assert list(original.shares.values_list("user_id", flat=True)) == ["bob"]
    assert original.messages.count() == 2
    assert CitationEvent.objects.count() == events


def test_a_copy_takes_the_title_given(handbook, make_chat, bob_api):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When bob copies it under a title of his own
    response = bob_api.post(f"/kb/chats/{chat.id}/copy", {"title": "  My notes  "}, format="json")

    # Then the copy carries it, trimmed
    assert response.json()["title"] == "My notes"


def test_a_copy_with_a_bad_title_is_400_and_makes_nothing(handbook, make_chat, bob_api):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When bob copies it with a title that is too long
    response = bob_api.post(f"/kb/chats/{chat.id}/copy", {"title": "t" * 201}, format="json")

    # Then it is 400 and no chat was made
    assert response.status_code == 400
    assert KbChat.objects.count() == 1


def test_a_copy_that_fails_halfway_leaves_no_chat(handbook, make_chat, ask, bob_api, monkeypatch):
    # Given alice's answered chat shared with bob
    chat = _answered_chat(handbook, make_chat, ask, readers=("bob",))

    # When the copy dies after the new chat was stored but before its messages were
    def crash(*args, **kwargs):
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(KbChatMessage.objects, "bulk_create", crash)
    with pytest.raises(RuntimeError):
        bob_api.post(f"/kb/chats/{chat.id}/copy", {}, format="json")

    # Then only the original exists
    assert list(KbChat.objects.values_list("pk", flat=True)) == [chat.id]


def test_copying_a_long_chat_costs_the_same_statements(
    handbook, make_chat, ask, bob_api, django_assert_max_num_queries
):
    # Given alice's chat of six exchanges, shared with bob
    chat = make_chat(handbook)
    for number in range(6):
        ask(chat.id, f"Question {number} about quota?")
    chat.shares.create(user_id="bob")

    # When bob copies it
    with django_assert_max_num_queries(14):
        response = bob_api.post(f"/kb/chats/{chat.id}/copy", {}, format="json")

    # Then all twelve messages came across in a fixed number of statements
    assert len(response.json()["messages"]) == 12


def test_the_rename_delete_and_copy_routes_are_in_the_openapi_schema(client):
    # Given the OpenAPI schema the service serves
    paths = client.get("/api/schema", HTTP_ACCEPT="application/json").json()["paths"]

    # When the knowledge base's write routes are looked up / Then each is documented with its refusals
    for path, method, refusals in (
        ("/kb/collections/{collection_id}", "patch", {"400", "403", "404"}),
        ("/kb/collections/{collection_id}", "delete", {"403", "404"}),
        ("/kb/documents/{document_id}", "patch", {"400", "403", "404", "409"}),
        ("/kb/documents/{document_id}", "delete", {"403", "404"}),
        ("/kb/chats/{chat_id}", "patch", {"400", "403", "404"}),
        ("/kb/chats/{chat_id}", "delete", {"403", "404"}),
        ("/kb/chats/{chat_id}/copy", "post", {"400", "404"}),
    ):
        assert refusals <= set(paths[path][method]["responses"]), (method, path)
