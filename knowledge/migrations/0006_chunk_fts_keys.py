"""SQLite only: which FTS5 rows belong to which document and collection, in an indexed table.

The FTS5 table's `document_id` and `collection_id` are UNINDEXED columns, so deleting by them
scanned the whole search index (a document's delete grew with the library: 7 ms at 10^3 chunks,
61 ms at 10^5). The side table maps both to the FTS5 rowid, which FTS5 keeps as an INTEGER PRIMARY
KEY of its own (stable across VACUUM), so a delete is a rowid lookup. PostgreSQL needs nothing:
its search vector is a column of the chunk row.

The SQL is spelled out here (not imported) so the migration stays as it was when it ran.
"""

from django.db import migrations

SQLITE_CREATE = [
    "CREATE TABLE IF NOT EXISTS knowledge_chunk_fts_key ("
    "fts_rowid INTEGER PRIMARY KEY, document_id TEXT NOT NULL, collection_id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS knowledge_chunk_fts_key_document ON knowledge_chunk_fts_key (document_id)",
    "CREATE INDEX IF NOT EXISTS knowledge_chunk_fts_key_collection ON knowledge_chunk_fts_key (collection_id)",
    "INSERT INTO knowledge_chunk_fts_key (fts_rowid, document_id, collection_id) "
    "SELECT rowid, document_id, collection_id FROM knowledge_chunk_fts",
]
SQLITE_DROP = ["DROP TABLE IF EXISTS knowledge_chunk_fts_key"]


def _run_on_sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_citation_event_identity")]

    operations = [migrations.RunPython(_run_on_sqlite(SQLITE_CREATE), _run_on_sqlite(SQLITE_DROP))]
