"""The rename, delete and copy forms of the knowledge pages: they post to the resource's own path and
go through the same services as the API; a refused rename comes back open with what was typed."""

from __future__ import annotations

import pytest

from collab.actor import Actor
from knowledge.models import Collection, Document, KbChat, KbChatMessage

pytestmark = pytest.mark.django_db


def test_the_collection_rename_form_renames_and_returns_to_the_collection(handbook, browser_for):
    # Given alice's handbook
    # When she submits its rename form
    response = browser_for("alice").post(
        f"/kb/collections/{handbook.id}", {"intent": "rename", "name": "Runbook", "description": "How we run"}
    )

    # Then the collection is renamed and she is back on its page
    assert (response.status_code, response["Location"]) == (303, f"/kb/collections/{handbook.id}/documents")
    assert Collection.objects.get(pk=handbook.id).name == "Runbook"


def test_a_refused_collection_rename_comes_back_open_with_what_was_typed(handbook, browser_for):
    # Given alice's handbook
    # When she submits a blank name with a new description
    response = browser_for("alice").post(
        f"/kb/collections/{handbook.id}", {"intent": "rename", "name": "   ", "description": "Typed with care"}
    )

    # Then the page answers 400 with the dialog open, saying why and keeping the description, and nothing changed
    content = response.content.decode()
    assert response.status_code == 400
    assert "data-show-on-load" in content
    assert 'data-testid="rename-error"' in content
    assert "Typed with care</textarea>" in content
    assert Collection.objects.get(pk=handbook.id).name == "Operations handbook"


def test_a_reader_renaming_a_collection_from_a_stale_page_is_told_why(handbook, browser_for):
    # Given alice's handbook, of which bob is no writer
    # When bob posts its rename form
    response = browser_for("bob").post(
        f"/kb/collections/{handbook.id}", {"intent": "rename", "name": "Bob's"}, follow=True
    )

    # Then he is back on the collection, told who may, and the name stays
    assert response.redirect_chain == [(f"/kb/collections/{handbook.id}/documents", 303)]
    assert "Only the writers" in response.content.decode()
    assert Collection.objects.get(pk=handbook.id).name == "Operations handbook"


def test_the_collection_delete_form_deletes_and_goes_to_the_list(handbook, browser_for):
    # Given alice's handbook
    # When she confirms its delete form
    response = browser_for("alice").post(f"/kb/collections/{handbook.id}", {"intent": "delete"}, follow=True)

    # Then it is gone, and the collections page says so
    assert response.redirect_chain[-1][0] == "/kb/collections"
    assert "Deleted the collection Operations handbook" in response.content.decode()
    assert not Collection.objects.exists()


def test_a_writer_deleting_a_collection_is_told_only_its_creator_may(handbook, browser_for, make_collection):
    # Given alice's handbook with bob as a writer
    from knowledge import services

    services.collection_writers_add(collection_id=handbook.id, actor=Actor("alice"), user_ids=["bob"])

    # When bob posts its delete form
    response = browser_for("bob").post(f"/kb/collections/{handbook.id}", {"intent": "delete"}, follow=True)

    # Then he is back on the collection, told why, and it stays
    assert "Only alice, who created" in response.content.decode()
    assert Collection.objects.filter(pk=handbook.id).exists()


def test_an_unknown_form_intent_changes_nothing(handbook, browser_for):
    # Given alice's handbook
    # When a form posts an intent the page does not send
    response = browser_for("alice").post(f"/kb/collections/{handbook.id}", {"intent": "explode"}, follow=True)

    # Then she is told, and nothing changed
    assert "nothing changed" in response.content.decode()
    assert Collection.objects.filter(pk=handbook.id, name="Operations handbook").exists()


def test_forms_of_a_missing_collection_document_or_chat_are_404(browser_for):
    # Given nothing
    # When alice posts rename forms to ids that do not exist
    responses = [
        browser_for("alice").post(path, {"intent": "rename", "name": "x", "filename": "x", "title": "x"})
        for path in ("/kb/collections/col_nope", "/kb/documents/doc_nope", "/kb/chats/chat_nope")
    ]

    # Then each is the not-found page
    assert [response.status_code for response in responses] == [404, 404, 404]


def test_a_document_renamed_to_a_taken_name_comes_back_with_the_typed_name(handbook, browser_for):
    # Given the handbook's quotas.md and sharing.md
    document = Document.objects.get(filename="quotas.md")

    # When alice renames quotas.md to sharing.md with the page's form
    response = browser_for("alice").post(f"/kb/documents/{document.id}", {"intent": "rename", "filename": "sharing.md"})

    # Then the page answers 409 with the dialog open on what she typed, and the name stays
    content = response.content.decode()
    assert response.status_code == 409
    assert 'value="sharing.md"' in content
    assert "already names a document" in content
    assert Document.objects.get(pk=document.id).filename == "quotas.md"


def test_the_document_forms_rename_then_delete(handbook, browser_for):
    # Given the handbook's quotas.md
    document = Document.objects.get(filename="quotas.md")
    alice = browser_for("alice")

    # When alice renames it, then deletes it, with the page's forms
    renamed = alice.post(f"/kb/documents/{document.id}", {"intent": "rename", "filename": "limits.md"})
    deleted = alice.post(f"/kb/documents/{document.id}", {"intent": "delete"})

    # Then she went back to the document, then to its collection, and it is gone
    assert renamed["Location"] == f"/kb/documents/{document.id}"
    assert deleted["Location"] == f"/kb/collections/{handbook.id}/documents"
    assert not Document.objects.filter(pk=document.id).exists()


def test_the_document_page_offers_rename_and_delete_to_writers_only(handbook, browser_for):
    # Given the handbook's quotas.md
    document = Document.objects.get(filename="quotas.md")

    # When alice (its writer) and bob (a reader) open its page
    alice_page = browser_for("alice").get(f"/kb/documents/{document.id}").content.decode()
    bob_page = browser_for("bob").get(f"/kb/documents/{document.id}").content.decode()

    # Then only alice gets the buttons and dialogs
    assert 'data-testid="open-rename"' in alice_page
    assert 'data-testid="delete-dialog"' in alice_page
    assert 'data-testid="open-rename"' not in bob_page
    assert 'data-testid="delete-dialog"' not in bob_page


def test_the_chat_forms_rename_then_delete(handbook, make_chat, browser_for):
    # Given alice's chat
    chat = make_chat(handbook, title="Questions")
    alice = browser_for("alice")

    # When she renames it, then deletes it, with the page's forms
    renamed = alice.post(f"/kb/chats/{chat.id}", {"intent": "rename", "title": "Quota questions"})
    title = KbChat.objects.get(pk=chat.id).title
    deleted = alice.post(f"/kb/chats/{chat.id}", {"intent": "delete"})

    # Then she went back to the chat, then to her chats, and it is gone
    assert (renamed["Location"], title) == (f"/kb/chats/{chat.id}", "Quota questions")
    assert deleted["Location"] == "/kb/chats"
    assert not KbChat.objects.exists()


def test_a_reader_posting_the_chat_delete_form_is_refused(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When bob posts its delete form
    response = browser_for("bob").post(f"/kb/chats/{chat.id}", {"intent": "delete"}, follow=True)

    # Then he is back on the chat, told it is read-only, and it stays
    assert "read-only" in response.content.decode()
    assert KbChat.objects.filter(pk=chat.id).exists()


def test_a_stranger_posting_chat_forms_gets_the_not_found_page(handbook, make_chat, browser_for):
    # Given alice's chat, not shared with dave
    chat = make_chat(handbook)

    # When dave posts its delete and copy forms
    delete = browser_for("dave").post(f"/kb/chats/{chat.id}", {"intent": "delete"})
    copy = browser_for("dave").post(f"/kb/chats/{chat.id}/copy")

    # Then both are 404 and nothing changed
    assert (delete.status_code, copy.status_code) == (404, 404)
    assert list(KbChat.objects.values_list("pk", flat=True)) == [chat.id]


def test_the_reader_sees_a_copy_button_and_the_owner_the_manage_buttons(handbook, make_chat, browser_for):
    # Given alice's chat shared with bob
    chat = make_chat(handbook)
    chat.shares.create(user_id="bob")

    # When each opens it
    bob_page = browser_for("bob").get(f"/kb/chats/{chat.id}").content.decode()
    alice_page = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then bob may copy it, and only alice may rename or delete it
    assert 'data-testid="copy-chat"' in bob_page
    assert 'data-testid="open-delete"' not in bob_page
    assert 'data-testid="open-rename"' in alice_page
    assert 'data-testid="copy-chat"' not in alice_page


def test_the_copy_form_opens_the_readers_own_copy(handbook, make_chat, ask, browser_for):
    # Given alice's answered chat shared with bob
    chat = make_chat(handbook, title="Quota questions")
    ask(chat.id, "How do I free capacity?")
    chat.shares.create(user_id="bob")

    # When bob presses "Copy to my chats"
    response = browser_for("bob").post(f"/kb/chats/{chat.id}/copy", follow=True)

    # Then he lands on his own copy, which he may ask in
    copy = KbChat.objects.get(created_by="bob")
    content = response.content.decode()
    assert response.redirect_chain[-1][0] == f"/kb/chats/{copy.id}"
    assert 'data-testid="ask-form"' in content
    assert "Copy of Quota questions" in content
    assert KbChatMessage.objects.filter(chat=copy).count() == 2


def test_the_chat_page_costs_the_same_statements_for_a_long_chat_in_a_big_library(
    handbook, make_collection, make_chat, ask, browser_for, django_assert_max_num_queries
):
    # Given alice's chat of five cited answers, in a library of twelve more collections
    for number in range(12):
        make_collection(f"Shelf {number}")
    chat = make_chat(handbook)
    for number in range(5):
        ask(chat.id, f"How do I free quota, take {number}?")

    # When she opens it
    with django_assert_max_num_queries(10):
        response = browser_for("alice").get(f"/kb/chats/{chat.id}")

    # Then every answer shows with its markers, in a fixed number of statements
    assert response.content.decode().count('data-testid="message-assistant"') == 5
    assert 'class="kb-marker"' in response.content.decode()


def test_an_answer_quoting_a_deleted_document_keeps_its_quote_without_a_dead_link(
    handbook, make_chat, ask, browser_for
):
    # Given alice's chat whose answer quotes quotas.md
    chat = make_chat(handbook)
    ask(chat.id, "How do I free capacity when a quota is hit?")
    document = Document.objects.get(filename="quotas.md")

    # When quotas.md is deleted and she opens the chat
    browser_for("alice").post(f"/kb/documents/{document.id}", {"intent": "delete"})
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the quote is still shown, said to be from a deleted document, with no link to it
    assert 'data-testid="source-deleted"' in content
    assert "my-resources screen" in content
    assert f"/kb/documents/{document.id}/chunks" not in content


def test_a_browser_opening_a_collection_is_sent_to_its_documents(handbook, browser_for):
    # Given the handbook
    # When alice's browser opens /kb/collections/<id>, and one that does not exist
    found = browser_for("alice").get(f"/kb/collections/{handbook.id}")
    missing = browser_for("alice").get("/kb/collections/col_nope")

    # Then the first goes to its documents page, and the second is the not-found page
    assert (found.status_code, found["Location"]) == (302, f"/kb/collections/{handbook.id}/documents")
    assert missing.status_code == 404


def test_a_nul_character_typed_into_a_rename_form_is_refused_on_the_page_and_changes_nothing(
    handbook, make_chat, browser_for
):
    # Found attacking the pages on PostgreSQL, which cannot store a NUL character: it was a 500.
    # Given alice's chat (on either database: the title is checked before anything is stored)
    chat = make_chat(handbook, title="Questions")

    # When she renames it to a title holding a NUL character
    response = browser_for("alice").post(f"/kb/chats/{chat.id}", {"intent": "rename", "title": "a\x00b"}, follow=True)

    # Then the page says why, and the title stays
    assert "contains a NUL character" in response.content.decode()
    assert KbChat.objects.get(pk=chat.id).title == "Questions"


@pytest.mark.postgres(reason="SQLite stores NUL characters; only PostgreSQL refuses them")
def test_a_nul_character_in_a_page_address_is_a_400_page(browser_for):
    # Found attacking the pages on PostgreSQL: a NUL in an id reached the database and answered 500.
    # Given PostgreSQL

    # When alice's browser opens a chat whose id holds a NUL character
    response = browser_for("alice").get("/kb/chats/a%00b")

    # Then it is the site's 400 page, not a server error
    assert response.status_code == 400
    assert "cannot be stored" in response.content.decode()
