"""One path per resource: browsers get the page, API clients the JSON (collab.web.html_or_api)."""

from __future__ import annotations

from collab.web import html_or_api
from knowledge.views import api, pages

collections = html_or_api(page=pages.collections_page, api=api.KbCollectionListApi)
collection = html_or_api(page=pages.collection_page, api=api.KbCollectionDetailApi)
collection_documents = html_or_api(page=pages.collection_documents_page, api=api.KbCollectionDocumentsApi)
collection_writers = html_or_api(page=pages.collection_writers_page, api=api.KbCollectionWritersApi)
# A form cannot send DELETE, so the page's "remove writer" button posts to the same path.
collection_writer = html_or_api(page=pages.collection_writer_remove_page, api=api.KbCollectionWriterApi)
document = html_or_api(page=pages.document_detail_page, api=api.KbDocumentDetailApi)
document_chunks = html_or_api(page=pages.document_page, api=api.KbDocumentChunksApi)
document_chunks_by_query = html_or_api(page=pages.document_page, api=api.KbDocumentChunksByQueryApi)
chats = html_or_api(page=pages.chats_page, api=api.KbChatListApi)
chat = html_or_api(page=pages.chat_page, api=api.KbChatDetailApi)
chat_copy = html_or_api(page=pages.chat_copy_page, api=api.KbChatCopyApi)
chat_messages = html_or_api(page=pages.chat_message_page, api=api.KbChatMessagesApi)
chat_share = html_or_api(page=pages.chat_share_page, api=api.KbChatShareApi)
# A form cannot send DELETE, so the page's "remove reader" button posts to the same path.
chat_unshare = html_or_api(page=pages.chat_unshare_page, api=api.KbChatUnshareApi)
