"""Chunk vectors for hybrid retrieval: one row per chunk, with the model that made it, and the
per-collection row that orders their writes and counts their deletes (README "Hybrid retrieval")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0007_chunk_title_page'),
    ]

    operations = [
        migrations.CreateModel(
            name='CollectionVectors',
            fields=[
                ('collection_id', models.CharField(max_length=40, primary_key=True, serialize=False)),
                ('drops', models.BigIntegerField(default=0)),
            ],
        ),
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
