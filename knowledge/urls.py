"""URLs of the knowledge base (the spec's /kb paths): browsers get the page, API clients the JSON
(collab.web.html_or_api)."""

from django.urls import path

from collab.web import html_or_api
from knowledge import pages, views

urlpatterns = [
    path(
        "kb/collections",
        html_or_api(page=pages.collections_page, api=views.KbCollectionListApi),
        name="kb-collections",
    ),
    path(
        "kb/collections/<str:collection_id>",
        html_or_api(page=pages.collection_page, api=views.KbCollectionDetailApi),
        name="kb-collection",
    ),
    path(
        "kb/collections/<str:collection_id>/documents",
        html_or_api(page=pages.collection_documents_page, api=views.KbCollectionDocumentsApi),
        name="kb-collection-documents",
    ),
    path(
        "kb/collections/<str:collection_id>/writers",
        html_or_api(page=pages.collection_writers_page, api=views.KbCollectionWritersApi),
        name="kb-collection-writers",
    ),
    # A form cannot send DELETE, so the page's "remove writer" button posts to the same path.
    path(
        "kb/collections/<str:collection_id>/writers/<str:user_id>",
        html_or_api(page=pages.collection_writer_remove_page, api=views.KbCollectionWriterApi),
        name="kb-collection-writer",
    ),
    # `chunks` is a literal segment and must be matched before `<document_id>` swallows it.
    path(
        "kb/documents/chunks",
        html_or_api(page=pages.document_page, api=views.KbDocumentChunksByQueryApi),
        name="kb-document-chunks-query",
    ),
    path(
        "kb/documents/<str:document_id>",
        html_or_api(page=pages.document_detail_page, api=views.KbDocumentDetailApi),
        name="kb-document",
    ),
    path(
        "kb/documents/<str:document_id>/chunks",
        html_or_api(page=pages.document_page, api=views.KbDocumentChunksApi),
        name="kb-document-chunks",
    ),
    path("kb/chats", html_or_api(page=pages.chats_page, api=views.KbChatListApi), name="kb-chats"),
    path("kb/chats/<str:chat_id>", html_or_api(page=pages.chat_page, api=views.KbChatDetailApi), name="kb-chat"),
    path(
        "kb/chats/<str:chat_id>/copy",
        html_or_api(page=pages.chat_copy_page, api=views.KbChatCopyApi),
        name="kb-chat-copy",
    ),
    path(
        "kb/chats/<str:chat_id>/messages",
        html_or_api(page=pages.chat_message_page, api=views.KbChatMessagesApi),
        name="kb-chat-messages",
    ),
    path(
        "kb/chats/<str:chat_id>/share",
        html_or_api(page=pages.chat_share_page, api=views.KbChatShareApi),
        name="kb-chat-share",
    ),
    # A form cannot send DELETE, so the page's "remove reader" button posts to the same path.
    path(
        "kb/chats/<str:chat_id>/share/<str:user_id>",
        html_or_api(page=pages.chat_unshare_page, api=views.KbChatUnshareApi),
        name="kb-chat-unshare",
    ),
]
