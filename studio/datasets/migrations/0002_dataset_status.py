"""A dataset's check status (checking / ready / refused), its warnings and longest prompt.

Datasets made before this were checked whole in the request that added them: they are ready.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="status",
            field=models.CharField(
                choices=[("checking", "Checking every row"), ("ready", "Ready"), ("refused", "Refused")],
                default="ready",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="dataset",
            name="status_detail",
            field=models.TextField(blank=True, help_text="Why the dataset was refused."),
        ),
        migrations.AddField(
            model_name="dataset",
            name="warnings",
            field=models.JSONField(blank=True, default=list, help_text="[{code, message, ...}] from the last check."),
        ),
        migrations.AddField(
            model_name="dataset",
            name="longest_prompt_chars",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="dataset",
            name="check_generation",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
