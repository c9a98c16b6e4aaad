"""Validation rollouts (trainers/validation.py) in the studio: written by the worker with their split,
kept out of the inspector's training list unless asked for (?split=validation|all), grouped apart
from training rollouts of the same step and prompt id, and readable by exactly who reads the run."""

import pytest

from studio.runs.models import Rollout
from studio.sharing.client_rules import rollout_rules
from studio.sharing.models import ShareLink
from tests.studio.runs.pages import url
from trainers.report import CriterionScore
from trainers.report import Rollout as Reported
from workers.reporting import DatabaseReporter


def reported(step: int, sample: int, split: str, reward: float) -> Reported:
    # The same prompt id in both splits: a held-out row's number may be a training row's too.
    return Reported(step=step, prompt_id="1", sample_index=sample, prompt="Say the letter: a", completion="a" * sample,
                    reward=reward, scores={"letter": CriterionScore(reward)}, trained=split == "train", split=split)  # fmt: skip


@pytest.fixture
def written(run):
    """Step 2 of a run as the worker writes it: two training samples, then three validation samples."""
    reporter = DatabaseReporter(run.pk)
    reporter.rollouts(2, [reported(2, 0, "train", 0.0), reported(2, 1, "train", 1.0)])
    reporter.rollouts(2, [reported(2, i, "validation", 0.5) for i in range(3)])
    return {split: list(Rollout.objects.filter(run=run, split=split).order_by("sample_index")) for split in
            ("train", "validation")}  # fmt: skip


def listed(api, run, **params) -> list[tuple[str, int]]:
    response = api.get(url(run, **params, limit=100))
    assert response.status_code == 200, response.json()
    return sorted((r["split"], r["sample_index"]) for r in response.json()["results"])


def test_the_worker_writes_each_rollout_with_its_split(run, written):
    assert [r.sample_index for r in written["train"]] == [0, 1]
    assert [(r.sample_index, r.trained, r.reward) for r in written["validation"]] == [(i, False, 0.5) for i in range(3)]


def test_the_list_shows_training_rollouts_unless_asked_for_validation(api, alice, run, written):
    api.force_authenticate(alice)
    assert listed(api, run) == [("train", 0), ("train", 1)]
    assert listed(api, run, split="train") == [("train", 0), ("train", 1)]
    assert listed(api, run, split="validation") == [("validation", 0), ("validation", 1), ("validation", 2)]
    assert len(listed(api, run, split="all")) == 5
    assert listed(api, run, split="validation", reward_min=0.5, step_min=2) == listed(api, run, split="validation")


def test_an_unknown_split_is_refused_naming_the_choices(api, alice, run, written):
    api.force_authenticate(alice)
    response = api.get(url(run, split="test"))
    assert response.status_code == 400
    assert response.json() == {"split": "must be one of train, validation, eval, all"}


def test_a_validation_rollout_s_group_holds_only_validation_samples(api, alice, run, written):
    api.force_authenticate(alice)
    detail = api.get(f"/api/runs/{run.pk}/rollouts/{written['validation'][0].pk}/").json()
    assert detail["split"] == "validation"
    assert [(g["split"], g["sample_index"]) for g in detail["group"]] == [("validation", i) for i in range(3)]
    detail = api.get(f"/api/runs/{run.pk}/rollouts/{written['train'][0].pk}/").json()
    assert [g["sample_index"] for g in detail["group"]] == [0, 1]


def test_validation_rollouts_are_read_by_members_and_share_links_only(api, alice, bob, charlie, run, written):
    # Bob is a teammate, Charlie an outsider: the run's own access rules, nothing new.
    api.force_authenticate(bob)
    assert len(listed(api, run, split="validation")) == 3
    api.force_authenticate(charlie)
    assert api.get(url(run, split="validation")).status_code == 404
    guest = api.__class__()
    assert guest.get(url(run, split="validation")).status_code == 403
    link = ShareLink.objects.create(run=run, created_by=alice)
    assert len(listed(guest, run, split="validation", share=link.token)) == 3


def test_the_page_rules_name_the_split_filter_and_its_default():
    assert rollout_rules()["split"] == {"param": "split", "default": "train", "all": "all",
                                        "choices": ["train", "validation", "eval", "all"]}  # fmt: skip


def test_live_summaries_carry_their_split(run, written):
    assert written["validation"][0].summary()["split"] == "validation"
    assert written["train"][0].summary()["split"] == "train"
