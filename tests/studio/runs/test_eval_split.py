"""An evaluation run's rollouts (trainers.run.evaluate, alone or one pair of a suite) under a split of their own,
"eval" (issue 40: they were filed under "train"): written so by the worker, listed by default for an evaluation
run and never for a training one, the run page's list opening on them before the first arrives, and migration
0019 moving an existing evaluation run's rows there (and back)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from studio.runs.html_report import chosen_rollouts
from studio.runs.models import Rollout, Run
from tests.studio.runs.pages import url
from tests.studio.runs.test_prompt_migration import migrate
from trainers.report import CriterionScore
from trainers.report import Rollout as Reported
from trainers.run.evaluate import SPLIT as EVALUATION_SPLIT
from workers.reporting import DatabaseReporter

BEFORE = [("runs", "0018_stop_saves_checkpoint")]
AFTER = [("runs", "0019_eval_split")]


def reported(sample: int, split: str, reward: float = 1.0) -> Reported:
    return Reported(step=0, prompt_id="1", sample_index=sample, prompt="Say the letter: a", completion="a",
                    reward=reward, scores={"letter": CriterionScore(reward)}, trained=False, split=split)  # fmt: skip


@pytest.fixture
def eval_run(team, alice):
    return Run.objects.create(team=team, name="eval-tiny", kind="eval", spec={}, created_by=alice, total_steps=1)


def listed(api, run, **params) -> list[tuple[str, int]]:
    response = api.get(url(run, **params, limit=100))
    assert response.status_code == 200, response.json()
    return sorted((r["split"], r["sample_index"]) for r in response.json()["results"])


def test_the_trainer_s_split_is_one_the_studio_stores():
    assert EVALUATION_SPLIT in {value for value, _ in Rollout._meta.get_field("split").choices}


def test_an_evaluation_run_lists_its_samples_by_default_and_a_training_run_lists_none(api, alice, run, eval_run):
    DatabaseReporter(eval_run.pk).rollouts(0, [reported(i, EVALUATION_SPLIT) for i in range(3)])
    DatabaseReporter(run.pk).rollouts(0, [reported(0, "train")])
    api.force_authenticate(alice)
    assert listed(api, eval_run) == [("eval", 0), ("eval", 1), ("eval", 2)]
    assert listed(api, eval_run, split="eval") == listed(api, eval_run, split="all") == listed(api, eval_run)
    assert listed(api, eval_run, split="train") == []
    assert listed(api, run) == [("train", 0)] and listed(api, run, split="eval") == []
    detail = api.get(f"/api/runs/{eval_run.pk}/rollouts/{Rollout.objects.filter(run=eval_run).first().pk}/").json()
    assert detail["split"] == "eval" and len(detail["group"]) == 3


def test_the_run_page_opens_an_evaluation_run_s_list_on_its_split_before_any_sample(alice, eval_run, run):
    client = Client()
    client.force_login(alice)
    page = client.get(f"/runs/{eval_run.pk}/").content.decode()
    assert '<option value="eval" selected>evaluation</option>' in page
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<option value="train" selected>training</option>' in page


@pytest.fixture
def old_apps(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # as the other tests expect it


def write_old_rollouts(apps) -> dict[str, int]:
    """One rollout of an evaluation run and one of a training run, as 0018 stored them (both "train")."""
    Team, Run, RunPrompt, Rollout = (apps.get_model(*name) for name in (("accounts", "Team"), ("runs", "Run"),
                                                                        ("runs", "RunPrompt"), ("runs", "Rollout")))  # fmt: skip
    team = Team.objects.create(name="t")
    ids = {}
    for kind in ("eval", "train"):
        run = Run.objects.create(team=team, name=kind, kind=kind, spec={})
        prompt = RunPrompt.objects.create(run=run, digest="d", content="q", chars=1)
        ids[kind] = Rollout.objects.create(run=run, step=0, prompt_id="p", sample_index=0, run_prompt=prompt,
                                           completion="a", reward=0.5).pk  # fmt: skip
    return ids


def test_migration_moves_evaluation_runs_rows_to_their_split_and_back(old_apps):
    ids = write_old_rollouts(old_apps)
    Rollout = migrate(AFTER).get_model("runs", "Rollout")
    rows = {kind: Rollout.objects.get(pk=pk) for kind, pk in ids.items()}
    assert (rows["eval"].split, rows["eval"].trained, rows["eval"].reward) == ("eval", False, 0.5)
    assert (rows["train"].split, rows["train"].trained) == ("train", True)
    Rollout = migrate(BEFORE).get_model("runs", "Rollout")
    assert {Rollout.objects.get(pk=pk).split for pk in ids.values()} == {"train"}


def test_an_evaluation_run_s_html_report_picks_its_best_and_worst_samples(eval_run):
    DatabaseReporter(eval_run.pk).rollouts(0, [reported(i, EVALUATION_SPLIT, reward=i / 2) for i in range(3)])
    picked = {r["why"]: r["reward"] for r in chosen_rollouts(eval_run)}
    assert picked == {"best of step 0": 1.0, "worst of step 0": 0.0}
