"""Runs keep the trainer's latest warning (a criterion failing on most rollouts, prompts cut to
max_prompt_tokens), and the event stream gains the `warning` kind that carries each one."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0005_rollout_prompt_reference")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="warning",
            field=models.TextField(
                blank=True,
                help_text="The latest warning the trainer reported (e.g. a criterion failing on most rollouts).",
            ),
        ),
        migrations.AlterField(
            model_name="runevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("metrics", "metrics"),
                    ("rollouts", "rollouts"),
                    ("status", "status"),
                    ("log", "log"),
                    ("checkpoint", "checkpoint"),
                    ("warning", "warning"),
                ],
                max_length=12,
            ),
        ),
    ]
