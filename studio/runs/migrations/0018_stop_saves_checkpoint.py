# A stop that stops (issue 39): whether a stop asked for saves a checkpoint ("Stop now" does not).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0017_ingest"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="stop_saves_checkpoint",
            field=models.BooleanField(
                default=True,
                help_text="A stop asked for saves the last whole step's checkpoint first (False: Stop now).",
            ),
        ),
    ]
