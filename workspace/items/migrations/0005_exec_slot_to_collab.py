# The command slots move to collab (collab.slots, collab 0005): the items app forgets the model,
# the table and its rows stay.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("items", "0004_payer_record_running_execs"),
        ("collab", "0005_command_slot"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ExecSlot")],
            database_operations=[],
        ),
    ]
