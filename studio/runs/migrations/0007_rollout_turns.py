"""Rollouts keep a multi-turn episode's turns and end reason, with the columns the inspector filters
on (turns, tool calls, tool errors, tools used, ended at a limit). Existing rollouts are single-turn:
the defaults (one turn, no tools) describe them, so adding the fields is all there is to do."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_run_warnings"),
    ]

    operations = [
        migrations.AddField(
            model_name="rollout",
            name="end_reason",
            field=models.CharField(
                blank=True, help_text="done | turn_limit | token_budget | error (multi-turn).", max_length=20
            ),
        ),
        migrations.AddField(
            model_name="rollout",
            name="ended_at_limit",
            field=models.BooleanField(default=False, help_text="end_reason is turn_limit or token_budget."),
        ),
        migrations.AddField(
            model_name="rollout",
            name="num_turns",
            field=models.IntegerField(default=1),
        ),
        migrations.AddField(
            model_name="rollout",
            name="tool_calls",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="rollout",
            name="tool_errors",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="rollout",
            name="tools_used",
            field=models.CharField(blank=True, help_text="`,name,name,`: see studio.runs.episodes.", max_length=1000),
        ),
        migrations.AddField(
            model_name="rollout",
            name="turns",
            field=models.JSONField(
                blank=True, help_text="Each turn as trainers.episodes.Turn.to_dict(); null: single turn.", null=True
            ),
        ),
    ]
