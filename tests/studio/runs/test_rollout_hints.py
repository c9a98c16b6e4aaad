"""Hinted retries (trainers.curriculum.hints) from the trainer's Rollout to the inspector's API:
the worker's reporter writes the hint, its fraction and the `hinted` column; the list filters
hinted / not hinted; summaries (what live websocket rollouts carry) and the detail show them."""

from studio.runs.models import Rollout as RolloutRow
from studio.runs.models import RunEvent
from studio.runs.panels import panel_for
from studio.runs.texts import TEXT_CAP
from studio.sharing.client_rules import rollout_rules
from tests.studio.runs.pages import url
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter


def reported(run) -> list[RolloutRow]:
    """Step 1 of a hinted run: a failed group (samples 0, 1) and its hinted retry (group p@2)."""
    plain = [
        Rollout(step=1, prompt_id="p", sample_index=i, prompt="Say it", completion="xyz", reward=0.0,
                scores={"starts": CriterionScore(0.0)}, trained=False)
        for i in range(2)
    ]  # fmt: skip
    hinted = [
        Rollout(step=1, prompt_id="p@2", sample_index=i, prompt="Say it", completion=" is yes", reward=1.0,
                scores={"starts": CriterionScore(1.0)}, hint="the answer", hint_fraction=0.25)
        for i in range(2)
    ]  # fmt: skip
    DatabaseReporter(run.pk).rollouts(1, plain + hinted)
    return list(RolloutRow.objects.filter(run=run).order_by("prompt_id", "sample_index"))


def test_the_reporter_writes_the_hint_and_marks_the_rollout_hinted(run):
    rows = reported(run)
    assert [(r.prompt_id, r.hinted, r.hint, r.hint_fraction) for r in rows] == [
        ("p", False, "", None), ("p", False, "", None), ("p@2", True, "the answer", 0.25), ("p@2", True, "the answer", 0.25),
    ]  # fmt: skip
    assert rows[2].completion == " is yes"  # what the model wrote; the hint is kept apart
    items = RunEvent.objects.get(run=run, kind="rollouts").payload["items"]
    assert [(i["hinted"], i["hint_fraction"]) for i in items] == [(False, None)] * 2 + [(True, 0.25)] * 2


def test_the_list_filters_hinted_and_not_hinted(api, alice, run):
    rows = reported(run)
    api.force_authenticate(alice)
    ids = {flag: sorted(r["id"] for r in api.get(url(run, hinted=flag)).json()["results"]) for flag in ("1", "0")}
    assert ids == {"1": [rows[2].pk, rows[3].pk], "0": [rows[0].pk, rows[1].pk]}
    assert "hinted" in api.get(url(run, hinted="maybe")).json()


def test_the_detail_carries_the_hint(api, alice, run):
    rows = reported(run)
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{rows[2].pk}/").json()
    assert (body["hinted"], body["hint"], body["hint_fraction"], body["completion"]) == (
        True, "the answer", 0.25, " is yes",
    )  # fmt: skip


def test_a_long_hint_is_capped_like_the_other_texts_and_read_in_full_from_the_text_endpoint(api, alice, run):
    # The hint is the start of a reference solution: as long as the dataset's answers, which may be long.
    hint = "step " * 10_000  # 50,000 characters
    DatabaseReporter(run.pk).rollouts(1, [
        Rollout(step=1, prompt_id="p@2", sample_index=0, prompt="Prove it", completion=" done", reward=1.0,
                scores={"starts": CriterionScore(1.0)}, hint=hint, hint_fraction=0.5),
    ])  # fmt: skip
    row = RolloutRow.objects.get(run=run)
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{row.pk}/").json()
    assert (body["hint"], body["truncated"]) == (hint[:TEXT_CAP], {"hint": len(hint)})
    assert body["completion"] == " done"  # a short field beside it is whole and not named
    page = api.get(f"/api/runs/{run.pk}/rollouts/{row.pk}/text/?field=hint&offset={TEXT_CAP}").json()
    assert (page["chars"], page["value"], page["next_offset"]) == (len(hint), hint[TEXT_CAP:], None)


def test_a_short_hint_is_whole_and_not_named_as_cut(api, alice, run):
    rows = reported(run)
    api.force_authenticate(alice)
    assert api.get(f"/api/runs/{run.pk}/rollouts/{rows[2].pk}/").json()["truncated"] == {}


def test_the_page_rules_name_the_hinted_filter():
    assert "hinted" in rollout_rules()["flags"]


def test_the_run_page_offers_the_hinted_filter_only_for_a_run_with_hints(client, alice, run):
    client.force_login(alice)
    assert 'name="hinted"' not in client.get(f"/runs/{run.pk}/").content.decode()
    run.spec = {"curriculum": {"hints": True}}
    run.save(update_fields=["spec"])
    assert 'name="hinted"' in client.get(f"/runs/{run.pk}/").content.decode()


def test_the_hint_metrics_have_their_panels():
    assert panel_for("hints/groups_hinted").id == "hints_groups"
    assert {panel_for(k).id for k in ("hints/hinted_pass_rate", "hints/mean_fraction")} == {"hints_rates"}
