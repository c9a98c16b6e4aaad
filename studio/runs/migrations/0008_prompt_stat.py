"""Per-prompt statistics of a run (studio.runs.prompt_stats): a new table, nothing to convert."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_rollout_turns"),
    ]

    operations = [
        migrations.CreateModel(
            name="PromptStat",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("prompt_id", models.CharField(max_length=200)),
                (
                    "draws",
                    models.IntegerField(default=0, help_text="Times the row was drawn (twice in one step counts 2)."),
                ),
                (
                    "alpha",
                    models.FloatField(
                        help_text="Beta posterior of the pass rate: 1 + passes, as the trainer counts them."
                    ),
                ),
                (
                    "beta",
                    models.FloatField(
                        help_text="Beta posterior of the pass rate: 1 + failures, as the trainer counts them."
                    ),
                ),
                ("pass_rate", models.FloatField(help_text="The trainer's estimate of the row's pass rate.")),
                ("pass_rate_std", models.FloatField(help_text="Its uncertainty (posterior standard deviation).")),
                ("last_step", models.IntegerField(help_text="The last step that drew the row.")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("unseen", "Unseen"),
                            ("solved", "Solved"),
                            ("learnable", "Learnable"),
                            ("never_solved", "Never solved"),
                        ],
                        default="unseen",
                        max_length=12,
                    ),
                ),
                ("history", models.JSONField(default=list, help_text="[[step, passed, samples], ...], oldest first.")),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="prompt_stats", to="runs.run"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["run", "pass_rate", "id"], name="runs_prompt_run_id_bffe02_idx"),
                    models.Index(fields=["run", "pass_rate_std", "id"], name="runs_prompt_run_id_d1faf9_idx"),
                    models.Index(fields=["run", "draws", "id"], name="runs_prompt_run_id_cc1a19_idx"),
                    models.Index(fields=["run", "last_step", "id"], name="runs_prompt_run_id_c3919b_idx"),
                    models.Index(fields=["run", "status"], name="runs_prompt_run_id_d7c890_idx"),
                ],
                "constraints": [models.UniqueConstraint(fields=("run", "prompt_id"), name="one_stat_per_run_prompt")],
            },
        ),
    ]
