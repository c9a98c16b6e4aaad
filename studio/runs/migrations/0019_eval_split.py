"""Evaluation runs' rollouts get a split of their own ("eval"): they were filed under "train" (issue 40), so the
inspector showed them as training samples. Existing evaluation runs' rows move to it (and were never trained on)."""

from django.db import migrations, models


def eval_rows_to_eval_split(apps, schema_editor):
    Rollout = apps.get_model("runs", "Rollout")
    Rollout.objects.filter(run__kind="eval").update(split="eval", trained=False)


def eval_rows_to_train_split(apps, schema_editor):
    Rollout = apps.get_model("runs", "Rollout")
    Rollout.objects.filter(run__kind="eval", split="eval").update(split="train", trained=True)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0018_stop_saves_checkpoint"),
    ]

    operations = [
        migrations.AlterField(
            model_name="rollout",
            name="split",
            field=models.CharField(
                choices=[("train", "Training"), ("validation", "Validation"), ("eval", "Evaluation")],
                default="train",
                help_text="train: sampled for a training step; validation: a held-out prompt sampled after the "
                "step; eval: sampled by an evaluation run.",
                max_length=12,
            ),
        ),
        migrations.RunPython(eval_rows_to_eval_split, eval_rows_to_train_split),
    ]
