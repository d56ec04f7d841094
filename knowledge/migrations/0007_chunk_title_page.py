"""A chunk's title (the headings it sits under) and PDF page; PostgreSQL also searches the title.

The PostgreSQL search vector is a generated column, so its expression changes by dropping it and
adding it again with the title in front of the text (PostgreSQL recomputes it for every row). SQLite's
FTS5 rows are written by the service, which now writes the title with the text; existing chunks have
no title, so their rows stay as they are.

The SQL is spelled out here (not imported) so the migration stays as it was when it ran.
"""

from django.db import migrations, models

POSTGRES_WITH_TITLE = [
    "DROP INDEX IF EXISTS knowledge_chunk_search_gin",
    "ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS search_vector",
    "ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', title || ' ' || text)) STORED",
    "CREATE INDEX knowledge_chunk_search_gin ON knowledge_chunk USING GIN (search_vector)",
]
POSTGRES_TEXT_ONLY = [
    "DROP INDEX IF EXISTS knowledge_chunk_search_gin",
    "ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS search_vector",
    "ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX knowledge_chunk_search_gin ON knowledge_chunk USING GIN (search_vector)",
]


def _run_on_postgres(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0006_chunk_fts_keys")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="title",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.AddField(
            model_name="chunk",
            name="page",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(_run_on_postgres(POSTGRES_WITH_TITLE), _run_on_postgres(POSTGRES_TEXT_ONLY)),
    ]
