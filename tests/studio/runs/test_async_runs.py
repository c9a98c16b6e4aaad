"""An asynchronous run on its page (issue 28): each rollout's policy versions and staleness from the
rollouts API (the inspector shows them), the pipeline's metrics in panels of their own that only a run
reporting them draws, and a note that the run is not bit-reproducible."""

from __future__ import annotations

from studio.runs.models import Rollout as RolloutRow
from studio.runs.panels import PANELS, panel_for, reserved
from studio.sharing.client_rules import client_rules
from tests.studio.records import make_rollout
from tests.studio.runs.test_metric_panels import trainer_metric_keys
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter

ASYNC_PANELS = {"correction", "staleness", "staleness_hist", "tokens_lag", "dropped_stale", "queue", "busy",
                "partial", "async_other"}  # fmt: skip
# What an asynchronous step with max_staleness 2 and a correction reports (trainers.run.loop, .pipeline).
ASYNC_KEYS = {
    "async/staleness_mean": "staleness", "async/staleness_max": "staleness",
    **{f"async/staleness_{k}": "staleness_hist" for k in range(3)},
    **{f"async/tokens_lag_{k}": "tokens_lag" for k in range(3)},
    "async/dropped_stale": "dropped_stale", "async/dropped_stale_total": "dropped_stale",
    "async/queue_depth": "queue", "async/engine_busy": "busy", "async/trainer_busy": "busy",
    "async/partial_frac": "partial", "async/policy_version": "async_other",
    "correction/weight_mean": "correction", "correction/truncated_frac": "correction",
    "correction/rejected_frac": "correction",
}  # fmt: skip


def test_the_rollout_detail_carries_its_policy_versions_and_staleness(api, alice, run):
    DatabaseReporter(run.pk).rollouts(4, [
        Rollout(step=4, prompt_id="p", sample_index=i, prompt="Say a", completion="a", reward=1.0,
                scores={"letter": CriterionScore(1.0)}, num_tokens=52, policy_versions=spans, staleness=stale)
        for i, (spans, stale) in enumerate([([[3, 40], [4, 12]], 1), ([[4, 52]], 0)])
    ])  # fmt: skip
    rows = list(RolloutRow.objects.filter(run=run).order_by("sample_index"))
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{rows[0].pk}/").json()
    assert (body["policy_versions"], body["staleness"]) == ([[3, 40], [4, 12]], 1)
    assert [g["staleness"] for g in body["group"]] == [1, 0]  # the group strip marks the stale one
    listed = api.get(f"/api/runs/{run.pk}/rollouts/").json()["results"]
    assert sorted(r["staleness"] for r in listed) == [0, 1]


def test_a_rollout_that_recorded_no_versions_says_none(api, alice, run):
    row = make_rollout(run, step=1)
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{row.pk}/").json()
    assert (body["policy_versions"], body["staleness"]) == (None, None)


def test_each_async_metric_lands_in_its_panel():
    assert {key: panel_for(key).id for key in ASYNC_KEYS} == ASYNC_KEYS
    assert panel_for("async/staleness_12").id == "staleness_hist"  # any max_staleness (up to 64)
    assert panel_for("async/something_new").id == "async_other"
    # The histograms are parts of a whole (the step's rollouts, tokens): drawn stacked.
    stacked = {p.id for p in PANELS if p.stacked}
    assert {"staleness_hist", "tokens_lag"} <= stacked and not {"staleness", "busy", "queue"} & stacked


def test_the_async_panels_appear_only_for_a_run_with_async_metrics():
    # The page draws a panel when a key it claims has points: a synchronous run reports no key these
    # panels claim, and no run's settings reserve them (they fill from the first step).
    synchronous = {key for key in trainer_metric_keys() if not key.startswith(("async/", "correction/"))}
    assert {p.id for key in synchronous if (p := panel_for(key))} & ASYNC_PANELS == set()
    asynchronous = {"rollout": {"asynchronous": {"mode": "async", "max_staleness": 2}}}
    assert set(reserved(asynchronous)) & ASYNC_PANELS == set()
    # The page's rules carry them, so its JS places the keys as this module does.
    assert {p["id"] for p in client_rules()["panels"]} >= ASYNC_PANELS


def test_an_asynchronous_run_says_on_its_page_that_it_is_not_bit_reproducible(client, alice, run):
    client.force_login(alice)
    assert "data-run-asynchronous" not in client.get(f"/runs/{run.pk}/").content.decode()
    run.spec = {"rollout": {"asynchronous": {"mode": "async", "max_staleness": 2, "partial_rollouts": True}}}
    run.save(update_fields=["spec"])
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "asynchronous · not bit-reproducible" in page
    assert "up to 2 versions older" in page and "Partial rollouts" in page  # its title says why


def test_a_synchronous_spec_says_nothing_even_in_async_mode_with_no_staleness(client, alice, run):
    client.force_login(alice)
    for settings in ({"mode": "sync", "max_staleness": 3}, {"mode": "async", "max_staleness": 0}, {"mode": "bogus"}):
        run.spec = {"rollout": {"asynchronous": settings}}
        run.save(update_fields=["spec"])
        assert "data-run-asynchronous" not in client.get(f"/runs/{run.pk}/").content.decode(), settings
