"""The chunk search index: an FTS5 table on SQLite, a generated tsvector column + GIN on PostgreSQL.

The SQL is spelled out here (not imported) so the migration stays as it was when it ran.
"""
from django.db import migrations

SQLITE_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_chunk_fts USING fts5("
    "text, chunk_id UNINDEXED, document_id UNINDEXED, collection_id UNINDEXED, tokenize = 'porter unicode61')"
)
SQLITE_DROP = "DROP TABLE IF EXISTS knowledge_chunk_fts"
POSTGRES_CREATE = [
    "ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX knowledge_chunk_search_gin ON knowledge_chunk USING GIN (search_vector)",
]
POSTGRES_DROP = [
    "DROP INDEX IF EXISTS knowledge_chunk_search_gin",
    "ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS search_vector",
]


def create_index(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute(SQLITE_CREATE)
    elif vendor == "postgresql":
        for statement in POSTGRES_CREATE:
            schema_editor.execute(statement)


def drop_index(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute(SQLITE_DROP)
    elif vendor == "postgresql":
        for statement in POSTGRES_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [migrations.RunPython(create_index, drop_index)]
