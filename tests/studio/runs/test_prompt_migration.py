"""Migration 0005 moves the prompts rollouts copied into one RunPrompt per distinct prompt of a run,
and back; on the database the suite runs on (SQLite, and PostgreSQL in the team-scale pass)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0004_rollout_text_search_index")]
AFTER = [("runs", "0005_rollout_prompt_reference")]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()  # what the previous call applied
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # as the other tests expect it


def write_old_rollouts(apps, count_per_run=(700, 3)):
    """Rollouts as 0004 stored them, each with its own copy of the prompt, in two runs."""
    Team, Run, Rollout = (apps.get_model(app, name) for app, name in (("accounts", "Team"), ("runs", "Run"),
                                                                       ("runs", "Rollout")))  # fmt: skip
    team = Team.objects.create(name="t")
    runs = [Run.objects.create(team=team, name=f"r{i}", spec={}) for i in range(2)]
    for run, count in zip(runs, count_per_run, strict=True):
        Rollout.objects.bulk_create(
            Rollout(run=run, step=i // 8, prompt_id=f"p{i % 3}", sample_index=i % 8, completion="a", reward=0.0,
                    prompt=CHAT if i % 3 == 0 else f"question {i % 3}")
            for i in range(count)
        )  # fmt: skip
    return runs


def test_existing_rollouts_end_up_referencing_one_row_per_distinct_prompt(old_apps):
    runs = write_old_rollouts(old_apps)  # 700 rows: more than one batch of the migration
    apps = migrate(AFTER)
    RunPrompt, Rollout = apps.get_model("runs", "RunPrompt"), apps.get_model("runs", "Rollout")
    assert RunPrompt.objects.filter(run_id=runs[0].pk).count() == 3
    assert RunPrompt.objects.filter(run_id=runs[1].pk).count() == 3  # per run: not shared across runs
    assert Rollout.objects.filter(run_prompt__isnull=True).count() == 0
    chat = RunPrompt.objects.get(run_id=runs[0].pk, preview="What is 2+2?")
    assert chat.content == CHAT and chat.chars == len("Be brief.") + len("What is 2+2?")
    assert Rollout.objects.filter(run_id=runs[0].pk, run_prompt=chat).count() == len(range(0, 700, 3))
    assert {r.run_prompt.content for r in Rollout.objects.filter(prompt_id="p1")} == {"question 1"}


def test_it_reverses_copying_each_prompt_back(old_apps):
    runs = write_old_rollouts(old_apps, count_per_run=(10, 4))
    migrate(AFTER)
    Rollout = migrate(BEFORE).get_model("runs", "Rollout")
    prompts = {(r.run_id, r.prompt_id): r.prompt for r in Rollout.objects.all()}
    assert prompts[(runs[0].pk, "p0")] == CHAT and prompts[(runs[1].pk, "p2")] == "question 2"
    assert len(prompts) == 6
