"""Knowledge base: collections, documents, chunks, answers, chats, sharing and citations."""
