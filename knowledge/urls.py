"""URLs of the knowledge base (the spec's /kb paths; pages share them by Accept)."""

from django.urls import path

from knowledge import views

urlpatterns = [
    path("kb/collections", views.collections, name="kb-collections"),
    path("kb/collections/<str:collection_id>", views.collection, name="kb-collection"),
    path("kb/collections/<str:collection_id>/documents", views.collection_documents, name="kb-collection-documents"),
    path("kb/collections/<str:collection_id>/writers", views.collection_writers, name="kb-collection-writers"),
    path(
        "kb/collections/<str:collection_id>/writers/<str:user_id>",
        views.collection_writer,
        name="kb-collection-writer",
    ),
    # `chunks` is a literal segment and must be matched before `<document_id>` swallows it.
    path("kb/documents/chunks", views.document_chunks_by_query, name="kb-document-chunks-query"),
    path("kb/documents/<str:document_id>", views.document, name="kb-document"),
    path("kb/documents/<str:document_id>/chunks", views.document_chunks, name="kb-document-chunks"),
    path("kb/chats", views.chats, name="kb-chats"),
    path("kb/chats/<str:chat_id>", views.chat, name="kb-chat"),
    path("kb/chats/<str:chat_id>/copy", views.chat_copy, name="kb-chat-copy"),
    path("kb/chats/<str:chat_id>/messages", views.chat_messages, name="kb-chat-messages"),
    path("kb/chats/<str:chat_id>/share", views.chat_share, name="kb-chat-share"),
    path("kb/chats/<str:chat_id>/share/<str:user_id>", views.chat_unshare, name="kb-chat-unshare"),
]
