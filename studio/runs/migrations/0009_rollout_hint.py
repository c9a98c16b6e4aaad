"""Rollouts say whether they are hinted retries (trainers.curriculum.hints) and carry the hint and its
fraction. Existing rollouts were never hinted: the defaults describe them."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_prompt_stat"),
    ]

    operations = [
        migrations.AddField(
            model_name="rollout",
            name="hint",
            field=models.TextField(
                blank=True, help_text="The start of the reference solution that opened the answer; never trained on."
            ),
        ),
        migrations.AddField(
            model_name="rollout",
            name="hint_fraction",
            field=models.FloatField(blank=True, help_text="The hint's share of the solution's tokens.", null=True),
        ),
        migrations.AddField(
            model_name="rollout",
            name="hinted",
            field=models.BooleanField(default=False, help_text="A hinted retry: its answer began with `hint`."),
        ),
    ]
