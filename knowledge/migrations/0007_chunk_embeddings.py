"""Chunk vectors for hybrid retrieval: one row per chunk, with the model that made it (README "Hybrid retrieval")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0006_chunk_fts_keys'),
    ]

    operations = [
        migrations.CreateModel(
            name='ChunkEmbedding',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('chunk_id', models.CharField(max_length=40, unique=True)),
                ('document_id', models.CharField(db_index=True, max_length=40)),
                ('collection_id', models.CharField(max_length=40)),
                ('model', models.CharField(max_length=200)),
                ('vector', models.BinaryField()),
            ],
            options={
                'indexes': [models.Index(fields=['collection_id', 'model', 'id'], name='kb_embedding_collection_idx')],
            },
        ),
    ]
