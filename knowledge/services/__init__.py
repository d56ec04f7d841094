"""Writes of the knowledge base, one module a use case: `collections` (collections and their
writers), `documents` (upload and its hand-off to ingest, rename, delete), `chats` (chats, their
messages, copies and sharing) and `citations` (the citation log and its roll-ups).

Callers may keep writing `from knowledge import services; services.chat_create(...)`: the public
functions are re-exported here.
"""

from knowledge.services.chats import (
    ChatExchange,
    ChatQuestion,
    chat_answer_events,
    chat_copy,
    chat_create,
    chat_delete,
    chat_message_send,
    chat_question_check,
    chat_rename,
    chat_share,
    chat_unshare,
)
from knowledge.services.citations import (
    SLICE_HOURS,
    SliceClose,
    citation_slices_close,
    citation_totals_rebuild,
    record_citations,
)
from knowledge.services.collections import (
    collection_create,
    collection_delete,
    collection_rename,
    collection_writer_ids,
    collection_writer_remove,
    collection_writers_add,
    collections_purge,
)
from knowledge.services.documents import (
    document_delete,
    document_rename,
    document_rename_by_staff,
    document_upload,
    documents_purge,
)
from knowledge.services.text import DESCRIPTION_MAX, NAME_MAX

__all__ = [
    "DESCRIPTION_MAX",
    "NAME_MAX",
    "SLICE_HOURS",
    "ChatExchange",
    "ChatQuestion",
    "SliceClose",
    "chat_answer_events",
    "chat_copy",
    "chat_create",
    "chat_delete",
    "chat_message_send",
    "chat_question_check",
    "chat_rename",
    "chat_share",
    "chat_unshare",
    "citation_slices_close",
    "citation_totals_rebuild",
    "collection_create",
    "collection_delete",
    "collection_rename",
    "collection_writer_ids",
    "collection_writer_remove",
    "collection_writers_add",
    "collections_purge",
    "document_delete",
    "document_rename",
    "document_rename_by_staff",
    "document_upload",
    "documents_purge",
    "record_citations",
]
