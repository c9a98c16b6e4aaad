"""PostgreSQL only: a trigram index for the rollout inspector's text search (`?q=`).

The search is `UPPER(completion::text) LIKE UPPER('%q%')`; without an index PostgreSQL reads
every rollout of the run (1-2 s at 1,000,000 rows), with it a page comes back in a few ms
(bench/api_curves_rollouts.py). SQLite has no such index and needs none at this scale (its scan
stops at the page's end, and a no-match scan takes ~0.3 s).

It was the `curves` app's first migration before the run's code moved into studio.runs; on a
database that ran it the index exists already, and IF NOT EXISTS makes this one a no-op.
"""

from django.db import migrations, transaction

INDEX = "runs_rollout_completion_trgm"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias), schema_editor.connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {INDEX} ON runs_rollout USING gin (upper(completion::text) gin_trgm_ops)"
            )
    except Exception as exc:  # noqa: BLE001 - no pg_trgm (or no right to create it): search still works, unindexed
        print(f"\n  rollout text search stays unindexed: {exc}")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_rollout_trained")]
    operations = [migrations.RunPython(create, drop)]
