"""The PostgreSQL lexical index's postings: one row per (collection, lexeme, chunk) with how often
the chunk uses the lexeme and the chunk's length in lexemes, and each collection's number of chunks
and of lexemes (summed over its chunks).

The BM25 query reads a question's words from the postings' primary key alone (an index-only range
per collection and word) instead of unnesting every matching chunk's tsvector, and the size of
its scope and its chunks' average length from the counts instead of counting the scope's chunks
(knowledge/search/postgres.py). Both are written by the index's `index_chunks` and `forget_*` in
the ingest and delete transactions; this migration fills them from the chunks already stored.
SQLite keeps its FTS5 table: nothing here runs there. It took 90 s at 10^5 chunks on a busy
machine (bench/REPORT.md); chunks that workers still running the code before it ingest meanwhile
get no postings (they are found by meaning only until uploaded again), so stop the workers while
it runs.

The SQL is spelled out here (not imported) so the migration stays as it was when it ran.
"""

from django.db import migrations

POSTGRES_CREATE = [
    "CREATE TABLE knowledge_chunk_term ("
    " collection_id varchar(40) NOT NULL,"
    " lexeme text NOT NULL,"
    " chunk_id varchar(40) NOT NULL,"
    " often integer NOT NULL,"
    " size integer NOT NULL,"
    " CONSTRAINT knowledge_chunk_term_pkey PRIMARY KEY (collection_id, lexeme, chunk_id) INCLUDE (often, size))",
    "CREATE TABLE knowledge_collection_chunks ("
    " collection_id varchar(40) NOT NULL PRIMARY KEY,"
    " chunks bigint NOT NULL,"
    " lexemes bigint NOT NULL)",
    "INSERT INTO knowledge_chunk_term (collection_id, lexeme, chunk_id, often, size) "
    "SELECT chunk.collection_id, word.lexeme, chunk.id, cardinality(word.positions), length(chunk.search_vector) "
    "FROM knowledge_chunk AS chunk, unnest(chunk.search_vector) AS word",
    "INSERT INTO knowledge_collection_chunks (collection_id, chunks, lexemes) "
    "SELECT collection_id, count(*), coalesce(sum(length(search_vector)), 0) FROM knowledge_chunk GROUP BY collection_id",
]
POSTGRES_DROP = [
    "DROP TABLE IF EXISTS knowledge_collection_chunks",
    "DROP TABLE IF EXISTS knowledge_chunk_term",
]


def _run_on_postgres(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0008_chunk_embeddings")]

    operations = [migrations.RunPython(_run_on_postgres(POSTGRES_CREATE), _run_on_postgres(POSTGRES_DROP))]
