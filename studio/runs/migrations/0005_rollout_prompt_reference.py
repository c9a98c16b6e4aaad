"""Rollouts reference their prompt (RunPrompt, one row per distinct prompt of a run) instead of
copying it: a 5 MB prompt drawn for 8 samples over 50 steps was stored 400 times.

The data moves run by run, BATCH rollouts at a time (ordered by id, so memory stays bounded by one
batch whatever the run's size), on SQLite and PostgreSQL alike. `prompt` is made nullable before
it is dropped only so that the migration can be reversed (the reverse copies each prompt back).

On PostgreSQL the rollout text search (`?q=`) now also reads prompts, through the join; it gets
the same trigram index 0004 gave completions (see there), on the prompt table's content.
"""

from django.db import migrations, models, transaction
from django.db.models import deletion

from studio.runs import texts
from studio.runs.prompts import digest, preview

BATCH = 500
INDEX = "runs_runprompt_content_trgm"


def move_prompts(apps, schema_editor):
    Run, Rollout, RunPrompt = (apps.get_model("runs", name) for name in ("Run", "Rollout", "RunPrompt"))
    for run_id in Run.objects.order_by("pk").values_list("pk", flat=True):
        known: dict[str, int] = {}  # digest -> RunPrompt id, for this run
        last = 0
        while batch := list(
            Rollout.objects.filter(run_id=run_id, pk__gt=last).order_by("pk").values_list("pk", "prompt")[:BATCH]
        ):
            last = batch[-1][0]
            ids_by_digest: dict[str, list[int]] = {}
            new = {}
            for pk, content in batch:
                d = digest(content)
                ids_by_digest.setdefault(d, []).append(pk)
                if d not in known and d not in new:
                    new[d] = RunPrompt(run_id=run_id, digest=d, content=content, chars=texts.chars(content),
                                       preview=preview(content))  # fmt: skip
            if new:
                RunPrompt.objects.bulk_create(new.values())
                known.update(RunPrompt.objects.filter(run_id=run_id, digest__in=list(new)).values_list("digest", "pk"))
            for d, pks in ids_by_digest.items():
                Rollout.objects.filter(pk__in=pks).update(run_prompt_id=known[d])


def copy_prompts_back(apps, schema_editor):
    Rollout, RunPrompt = apps.get_model("runs", "Rollout"), apps.get_model("runs", "RunPrompt")
    for prompt in RunPrompt.objects.order_by("pk").iterator(chunk_size=BATCH):
        Rollout.objects.filter(run_prompt_id=prompt.pk).update(prompt=prompt.content)


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias), schema_editor.connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {INDEX} ON runs_runprompt USING gin (upper(content::text) gin_trgm_ops)"
            )
    except Exception as exc:  # noqa: BLE001 - no pg_trgm (or no right to create it): search still works, unindexed
        print(f"\n  prompt text search stays unindexed: {exc}")


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0004_rollout_text_search_index")]

    operations = [
        migrations.CreateModel(
            name="RunPrompt",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("digest", models.CharField(help_text="sha256 of the content as canonical JSON.", max_length=64)),
                ("content", models.JSONField(help_text="Text or a list of chat messages.")),
                ("chars", models.IntegerField(help_text="Characters of text in the content (every message's).")),
                ("preview", models.CharField(blank=True, help_text="Start of the last user message.", max_length=120)),
                ("run", models.ForeignKey(on_delete=deletion.CASCADE, related_name="prompts", to="runs.run")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("run", "digest"), name="one_prompt_per_run_content")]
            },
        ),
        migrations.AddField(
            model_name="rollout",
            name="run_prompt",
            field=models.ForeignKey(
                null=True, on_delete=deletion.CASCADE, related_name="rollouts", to="runs.runprompt"
            ),
        ),
        migrations.AlterField(
            model_name="rollout",
            name="prompt",
            field=models.JSONField(null=True, help_text="Text or a list of chat messages."),
        ),
        migrations.RunPython(move_prompts, copy_prompts_back),
        migrations.RemoveField(model_name="rollout", name="prompt"),
        migrations.AlterField(
            model_name="rollout",
            name="run_prompt",
            field=models.ForeignKey(on_delete=deletion.CASCADE, related_name="rollouts", to="runs.runprompt"),
        ),
        migrations.RunPython(create_index, drop_index),
    ]
