# The command slots move from the items app to collab (collab.slots): the table and its rows stay.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collab", "0004_inbox_version"),
        # The table was made there.
        ("items", "0004_payer_record_running_execs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="CommandSlot",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("user_id", models.CharField(max_length=150)),
                        ("slot", models.PositiveSmallIntegerField()),
                        ("expires_at", models.DateTimeField()),
                    ],
                    options={
                        "db_table": "items_execslot",
                        "constraints": [
                            models.UniqueConstraint(fields=("user_id", "slot"), name="exec_slot_one_holder")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
