"""Migration 0007 adds the turns and the filter columns to rollouts, and back; rollouts already
stored read as single-turn episodes (one turn, no tools, not at a limit)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.studio.runs.test_prompt_migration import migrate

BEFORE = [("runs", "0006_run_warnings")]
AFTER = [("runs", "0007_rollout_turns")]


@pytest.fixture
def old_apps(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # as the other tests expect it


def write_old_rollout(apps):
    Team, Run, RunPrompt, Rollout = (apps.get_model(*name) for name in (("accounts", "Team"), ("runs", "Run"),
                                                                        ("runs", "RunPrompt"), ("runs", "Rollout")))  # fmt: skip
    run = Run.objects.create(team=Team.objects.create(name="t"), name="r", spec={})
    prompt = RunPrompt.objects.create(run=run, digest="d", content="q", chars=1)
    return Rollout.objects.create(run=run, step=1, prompt_id="p", sample_index=0, run_prompt=prompt, completion="a",
                                  reward=0.5)  # fmt: skip


def test_existing_rollouts_become_one_turn_episodes_and_new_ones_keep_their_turns(old_apps):
    old = write_old_rollout(old_apps)
    Rollout = migrate(AFTER).get_model("runs", "Rollout")
    row = Rollout.objects.get(pk=old.pk)
    assert (row.turns, row.end_reason, row.num_turns, row.tool_calls, row.tool_errors, row.tools_used,
            row.ended_at_limit, row.reward) == (None, "", 1, 0, 0, "", False, 0.5)  # fmt: skip
    Rollout.objects.filter(pk=old.pk).update(
        turns=[{"text": "hi"}, {"text": "done"}], num_turns=2, tools_used=",calculator,"
    )
    assert Rollout.objects.filter(num_turns=2, tools_used__contains=",calculator,").count() == 1


def test_it_reverses_dropping_the_turns_and_keeping_the_rollout(old_apps):
    old = write_old_rollout(old_apps)
    migrate(AFTER)
    Rollout = migrate(BEFORE).get_model("runs", "Rollout")
    row = Rollout.objects.get(pk=old.pk)
    assert (row.completion, row.reward) == ("a", 0.5)
    assert not hasattr(row, "turns") and not hasattr(row, "num_turns")
