"""The knowledge pages: same paths as the API, chosen by Accept; forms go through the same services."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from collab.models import Notification
from knowledge.models import Collection, Document, KbChat, KbChatMessage, KbChatShare

pytestmark = pytest.mark.django_db


def test_collections_page_lists_collections_with_cited_counts(handbook, browser_for):
    # Given the handbook
    # When alice's browser opens /kb/collections
    response = browser_for("alice").get("/kb/collections")

    # Then it gets an HTML page that lists the handbook, cited zero times
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"Operations handbook" in response.content
    assert b'data-testid="collection-cited">0<' in response.content


def test_collection_form_creates_a_collection_and_opens_it(browser_for):
    # Given bob in a browser
    # When he submits the collection form
    response = browser_for("bob").post("/kb/collections", {"name": "Runbooks"})

    # Then the collection is his and he is sent to its documents
    collection = Collection.objects.get()
    assert response.status_code == 303
    assert response["Location"] == f"/kb/collections/{collection.id}/documents"
    assert collection.created_by == "bob"


@pytest.mark.parametrize("field", ["name", "description"])
def test_collection_form_with_a_nul_character_is_refused_on_the_page_and_stores_nothing(browser_for, field):
    # Given bob in a browser
    # When he submits the collection form with a NUL character in its name or its description
    values = {"name": "Runbooks", "description": "", field: "Run\x00books"}
    response = browser_for("bob").post("/kb/collections", values, follow=True)

    # Then the page says why, on either database, and nothing is stored
    assert b"contains a NUL character" in response.content
    assert not Collection.objects.exists()


def test_documents_page_shows_status_size_chunks_and_the_upload_form(handbook, browser_for):
    # Given the handbook
    # When alice's browser opens its documents
    response = browser_for("alice").get(f"/kb/collections/{handbook.id}/documents")

    # Then the page lists both documents, ready, with the upload form
    content = response.content.decode()
    assert "quotas.md" in content
    assert "sharing.md" in content
    assert 'data-testid="document-status">ready<' in content
    assert 'enctype="multipart/form-data"' in content


def test_upload_form_stores_and_ingests_the_document(make_collection, browser_for, run_tasks):
    # Given alice's collection with carol as writer, and a text file
    collection = make_collection(writers=["carol"])
    file = SimpleUploadedFile("notes.txt", b"Sandboxes are closed from my resources.", content_type="text/plain")

    # When carol submits it with the upload form and the worker runs
    response = browser_for("carol").post(f"/kb/collections/{collection.id}/documents", {"file": file})
    run_tasks()

    # Then she is sent on, and the document is ingested as hers
    assert response.status_code == 303
    document = Document.objects.get()
    assert (document.status, document.created_by) == ("ready", "carol")


def test_upload_form_shows_a_refused_file_as_a_message(make_collection, browser_for):
    # Given alice's collection and an empty file
    collection = make_collection()
    file = SimpleUploadedFile("empty.txt", b"", content_type="text/plain")

    # When she submits it with the upload form
    response = browser_for("alice").post(f"/kb/collections/{collection.id}/documents", {"file": file}, follow=True)

    # Then the page says the file is empty and nothing is stored
    assert b"is empty" in response.content
    assert not Document.objects.exists()


def test_document_page_shows_chunks_with_cited_counts(handbook, browser_for):
    # Given the handbook's quotas.md
    document = handbook.documents.get(filename="quotas.md")

    # When alice's browser opens its chunks by the path form and by the query form
    by_path = browser_for("alice").get(f"/kb/documents/{document.id}/chunks")
    by_query = browser_for("alice").get(f"/kb/documents/chunks?id={document.id}")

    # Then both pages load, and show the chunks with their cited counts
    assert by_path.status_code == by_query.status_code == 200
    assert b'data-testid="chunk-cited">cited 0<' in by_path.content
    assert b"my-resources screen" in by_query.content


def test_chat_page_shows_clickable_markers_that_open_the_cited_chunks(handbook, make_chat, ask, browser_for):
    # Given alice's chat with one answer over the handbook
    chat = make_chat(handbook)
    answer = ask(chat.id, "How do I free capacity?").json()["answer"]

    # When her browser opens the chat
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the answer's marker links to its citation, and the ask form and share dialog show
    assert f'href="#cite-{answer["id"]}-1"' in content
    assert f'id="cite-{answer["id"]}-1"' in content
    assert 'data-testid="ask-form"' in content
    assert 'data-testid="share-dialog"' in content


def test_chat_page_drops_an_answers_marker_naming_no_source_and_keeps_the_questions_brackets(
    handbook, make_chat, ask, browser_for
):
    # Given alice's answered chat whose stored answer (written before markers were checked) cites [7]
    # with no source, and whose question mentions [12]
    chat = make_chat(handbook)
    answer = ask(chat.id, "How do I free capacity?").json()["answer"]
    KbChatMessage.objects.filter(pk=answer["id"]).update(content="Free capacity on my-resources [1] or [7].")
    KbChatMessage.objects.filter(chat=chat, role="user").update(content="What does step [12] free?")

    # When her browser opens the chat
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the answer keeps its marker [1] and not [7]; the question reads as she typed it
    assert f'href="#cite-{answer["id"]}-1"' in content
    assert "[7]" not in content
    assert "What does step [12] free?" in content


def test_shared_reader_sees_a_read_only_chat_without_a_send_box(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When bob's browser opens it
    content = browser_for("bob").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the page is read-only, without the ask form or the share dialog
    assert 'data-testid="read-only"' in content
    assert 'data-testid="ask-form"' not in content
    assert 'data-testid="share-dialog"' not in content


def test_stranger_gets_the_not_found_page_for_a_chat(handbook, make_chat, browser_for):
    # Given alice's chat
    chat = make_chat(handbook)

    # When dave's browser opens it / Then it is 404
    assert browser_for("dave").get(f"/kb/chats/{chat.id}").status_code == 404


def test_ask_form_stores_the_exchange_and_returns_to_the_answer(handbook, make_chat, browser_for):
    # Given alice's chat over the handbook
    chat = make_chat(handbook)

    # When she asks with the page's form
    response = browser_for("alice").post(f"/kb/chats/{chat.id}/messages", {"content": "quota"})

    # Then she is sent back to the chat at the stored answer
    answer = KbChatMessage.objects.get(role="assistant")
    assert response.status_code == 303
    assert response["Location"] == f"/kb/chats/{chat.id}#msg-{answer.id}"


def test_ask_form_of_a_shared_reader_is_refused_and_stores_nothing(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When bob submits the ask form
    response = browser_for("bob").post(f"/kb/chats/{chat.id}/messages", {"content": "quota"}, follow=True)

    # Then the page says the chat is read-only and nothing is stored
    assert b"read-only" in response.content
    assert not KbChatMessage.objects.exists()


def test_chat_form_creates_a_chat_over_the_chosen_collections(handbook, browser_for):
    # Given the handbook
    # When alice submits the chat form over it
    response = browser_for("alice").post("/kb/chats", {"title": "Help", "collection_ids": [handbook.id]})

    # Then she is sent to the new chat, which covers the handbook
    chat = KbChat.objects.get()
    assert response["Location"] == f"/kb/chats/{chat.id}"
    assert list(chat.collections.values_list("pk", flat=True)) == [handbook.id]


def test_share_dialog_shares_and_notifies(handbook, make_chat, browser_for, django_capture_on_commit_callbacks):
    # Given alice's chat
    chat = make_chat(handbook)

    # When she shares it with bob and carol from the share dialog
    with django_capture_on_commit_callbacks(execute=True):
        browser_for("alice").post(f"/kb/chats/{chat.id}/share", {"user_ids": ["bob", "carol"]})

    # Then both are readers and each got a share notification
    assert sorted(KbChatShare.objects.values_list("user_id", flat=True)) == ["bob", "carol"]
    assert Notification.objects.filter(kind="share").count() == 2


def test_remove_reader_button_unshares(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When she presses bob's remove button
    response = browser_for("alice").post(f"/kb/chats/{chat.id}/share/bob")

    # Then she is sent back and bob is no reader any more
    assert response.status_code == 303
    assert not KbChatShare.objects.exists()


def test_chats_page_lists_chats_shared_with_the_reader(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook, title="Alice's quota questions")
    chat.shares.create(user_id="bob")

    # When bob's browser opens the chats page
    content = browser_for("bob").get("/kb/chats").content.decode()

    # Then it lists alice's chat, marked read-only
    assert "Alice&#x27;s quota questions" in content
    assert "read-only" in content
