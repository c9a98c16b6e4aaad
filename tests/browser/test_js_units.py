"""The run page's JS modules under node, without a browser: number formatting, the live
merges that must not show a rollout or a curve point twice, and the server's rules (filters,
orders, note limits, curve panels) applied as the server applies them.

Each test copies frontend/static/js next to a small ES module script (the page's modules
are plain ES modules; the copy gets a package.json saying so), runs it with node and reads
back the JSON it prints. The script sees `rules`, the payload the pages carry
(studio.sharing.client_rules), as the pages hand it to the modules. The DOM the rollout list,
its filters and the rollout detail touch is a few stub objects. Skipped where node is not installed."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.http import QueryDict

from studio.accounts.models import Team
from studio.runs import rollout_query
from studio.runs.models import Rollout, RolloutScore, Run
from studio.runs.panels import panel_for
from studio.sharing.client_rules import client_rules
from tests.studio.records import prompt_of
from tests.studio.runs.test_metric_panels import trainer_metric_keys

NODE = shutil.which("node")
JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"
RULES = client_rules()

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def run_js(tmp_path: Path, body: str):
    folder = tmp_path / "js"
    shutil.copytree(JS, folder)
    (folder / "package.json").write_text('{"type": "module"}')
    script = folder / "check.js"
    script.write_text(f"const rules = {json.dumps(RULES)};\n" + body)
    done = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


FMT_CASES = [
    # (value, digits, shown)
    (1500.25, 4, "1,500"),  # was "15": zeros stripped from the whole part
    (1230.2, 4, "1,230"),  # was "123"
    (12340.3, 4, "12,340"),  # was "1.234e+4" / "1234"
    (123456.7, 4, "123,457"),
    (1500.25, 5, "1,500.3"),
    (0.1234567, 4, "0.1235"),
    (0.5, 4, "0.5"),
    (-0.25, 3, "-0.25"),
    (0.04, 4, "0.04"),
    (0.0012345, 3, "0.00123"),
    (3e-5, 4, "3e-5"),
    (2.5e-4, 4, "2.5e-4"),
    (1.23456e-7, 3, "1.23e-7"),
    (1500, 4, "1,500"),
    (0, 4, "0"),
    (-0.0, 4, "0"),
    (None, 4, "–"),
]


def test_fmt_keeps_the_whole_part_and_strips_only_zeros_after_the_point(tmp_path):
    cases = [[value, digits] for value, digits, _ in FMT_CASES]
    got = run_js(
        tmp_path,
        f"""
        const {{ fmt }} = await import("./api.js");
        const cases = {json.dumps(cases)};
        console.log(JSON.stringify([...cases.map(([v, d]) => fmt(v, d)), fmt(NaN)]));
        """,
    )
    want = [shown for _, _, shown in FMT_CASES] + ["–"]
    assert list(zip(cases + [["NaN", 4]], got, strict=True)) == list(zip(cases + [["NaN", 4]], want, strict=True))


# Step cost inputs as the form's fields hold them (texts), across the rollout budgets.
BASE_COST = {"prompts": "8", "group": "4", "new_tokens": "64", "prompt_tokens": "512", "dynamic": False,
             "max_rounds": "4", "passes": "1", "budget": "fixed", "budget_total": "", "min_group": "2",
             "max_group": "32", "procs": "1", "nodes": "1"}  # fmt: skip
COST_CASES = [
    {},
    {"dynamic": True, "passes": "2"},
    {"budget": "knapsack"},  # no total: what fixed costs
    {"budget": "knapsack", "budget_total": "1500", "min_group": "100", "max_group": "1000"},
    {"budget": "brorl", "max_group": "16"},
    {"budget": "brorl", "max_group": "2000", "dynamic": True},
    {"procs": "3"},  # 8 prompts over 3 processes: up to 3 each
    {"procs": "4", "nodes": "2", "prompts": "9"},
]


def server_cost(inputs: dict):
    """studio.experiments.layout.StepCost of the same field texts, as the page renders it (None: no cost)."""
    from studio.experiments.layout import COST_INPUTS, StepCost
    from studio.lib.schema_form import FormField

    fields = [FormField(name=n, label=n, widget="text", value=inputs[r]) for r, n in COST_INPUTS.items()]
    cost = StepCost.of(fields, inputs.get("environment"))
    return cost and cost.shown


def test_the_step_cost_js_counts_each_rollout_budget_as_the_server_does(tmp_path):
    cases = [{**BASE_COST, **case} for case in COST_CASES] + [{**BASE_COST, "budget": "wide"}]
    got = run_js(
        tmp_path,
        f"""
        const {{ stepCost }} = await import("./experiment_form.js");
        const shown = (c) => c && Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v.toLocaleString("en-US")]));
        console.log(JSON.stringify({json.dumps(cases)}.map((inputs) => shown(stepCost(inputs)))));
        """,
    )
    assert got == [server_cost(inputs) for inputs in cases]
    # The budgets' own rules; a budget the trainer does not know costs nothing the page could trust.
    assert [c and c["completions"] for c in got] == ["32", "32", "32", "1,500", "128", "16,000", "32", "36", None]
    assert got[3]["group"] == "100–1,000" and got[4]["budget"] == "brorl"
    assert [(c["processes"], c["prompts_per_process"]) for c in got[6:8]] == [("3", "3"), ("8", "2")]


# Episodes: trainers.spec.token_bounds caps each turn at min(max_new_tokens, max_turn_tokens).
ENV_COST_CASES = [
    {"new_tokens": "32", "environment": {"max_turns": 4, "max_turn_tokens": 256, "max_episode_tokens": 1024}},
    {"environment": {"max_turns": 4, "max_turn_tokens": 48, "max_episode_tokens": 100}},
    {"environment": {"max_turns": 1, "max_turn_tokens": 256, "max_episode_tokens": 1024}, "dynamic": True},
]


def test_the_step_cost_js_follows_the_token_limits_of_an_environment_as_the_server_does(tmp_path):
    cases = [{**BASE_COST, **case} for case in ENV_COST_CASES]
    environments = {"7": {"latest": 2, "versions": {"1": {"max_turns": 1}, "2": {"max_turns": 2}}}}
    got = run_js(
        tmp_path,
        f"""
        const {{ stepCost, chosenEnvironment }} = await import("./experiment_form.js");
        const shown = (c) => c && Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v.toLocaleString("en-US")]));
        const environments = {json.dumps(environments)};
        console.log(JSON.stringify({{
          costs: {json.dumps(cases)}.map((inputs) => shown(stepCost(inputs))),
          chosen: [["7", ""], ["7", "1"], ["7", "9"], ["", ""], ["8", ""]].map(([e, v]) => chosenEnvironment(environments, e, v)),
        }}));
        """,
    )
    assert got["costs"] == [server_cost(inputs) for inputs in cases]
    # 8 prompts x 4 samples = 32 episodes: 4 turns of 32 (not 256) tokens; 4 turns of 48 within 100; 1 turn of 64.
    assert [c["generated"] for c in got["costs"]] == [f"{32 * 128:,}", f"{32 * 100:,}", f"{4 * 32 * 64:,}"]
    assert [c["trained"] for c in got["costs"]] == [f"{32 * (512 + 1024):,}", f"{32 * (512 + 100):,}",
                                                    f"{32 * (512 + 64):,}"]  # fmt: skip
    assert [c["turn_tokens"] for c in got["costs"]] == ["32", "48", "64"]
    assert got["chosen"] == [{"max_turns": 2}, {"max_turns": 1}, {"max_turns": 2}, None, None]


PARALLEL_CASES = [("1", "1", "full"), ("2", "1", "full"), ("4", "2", "hybrid"), ("", "1", "full"), ("1.5", "1", "full")]


def test_the_parallel_summary_js_says_what_the_server_says(tmp_path):
    from studio.experiments.layout import parallel_summary

    got = run_js(
        tmp_path,
        f"""
        const {{ parallelSummary }} = await import("./experiment_form.js");
        console.log(JSON.stringify({json.dumps(PARALLEL_CASES)}.map((c) => parallelSummary(...c))));
        """,
    )
    assert got == [parallel_summary(*case) for case in PARALLEL_CASES]
    assert got[:3] == ["1 process", "2 processes on one machine, full sharding",
                       "8 processes: 4 per node × 2 nodes (Ray), hybrid sharding"]  # fmt: skip


# A stand-in for the elements the rollout list, its filters and the detail read: enough to construct
# them and render rows.
FAKE_DOM = """
const element = () => ({
  innerHTML: "", textContent: "", hidden: false, dataset: {}, options: [], elements: {},
  classList: { add() {}, remove() {} },
  addEventListener() {}, insertAdjacentHTML() {}, scrollIntoView() {},
  appendChild(child) { this.options.push(child); },
  querySelector() { return null; }, querySelectorAll() { return []; },
});
const parts = {};
const root = element();
root.querySelector = (selector) => (parts[selector] ??= element());
root.querySelector("form.filters").elements.criterion = element();
globalThis.document = { addEventListener() {}, createElement: element };
globalThis.FormData = class { get() { return null; } };  // every filter empty: newest first, no search
"""


def rollout(id_, step):
    return {"id": id_, "step": step, "prompt_id": "p", "sample_index": 0, "reward": 1.0, "advantage": 0.0,
            "num_tokens": 3, "finish_reason": "stop", "scores": {}, "preview": ""}  # fmt: skip


@pytest.mark.parametrize("live_first", [False, True], ids=["page-then-live", "live-then-page"])
def test_the_inspector_shows_a_rollout_once_when_the_page_and_the_socket_both_bring_it(tmp_path, live_first):
    page = [rollout(3, 2), rollout(2, 1), rollout(1, 1)]  # newest first, as the list loads
    live = [rollout(3, 2), rollout(4, 3)]  # committed between the metrics cursor and the list read
    ids = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const {{ RolloutList }} = await import("./rollout_list.js");
        let answer;
        const api = {{ get: () => new Promise((resolve) => {{ answer = resolve; }}) }};
        const rollouts = new RolloutList(root, {{ api, runId: 1, rules }});
        const loaded = rollouts.reload();
        const page = {json.dumps(page)}, live = {json.dumps(live)};
        if ({json.dumps(live_first)}) rollouts.onLive(live);
        answer({{ results: page, next_cursor: null }});
        await loaded;
        if (!{json.dumps(live_first)}) rollouts.onLive(live);
        rollouts.onLive([live[1]]);  // and a repeat of one already listed changes nothing
        console.log(JSON.stringify(rollouts.items.map((it) => it.id)));
        """,
    )
    assert sorted(ids, reverse=True) == [4, 3, 2, 1] == sorted(set(ids), reverse=True)
    assert len(ids) == 4


def test_live_rollouts_flow_in_at_the_top_and_wait_behind_the_banner_when_scrolled_away(tmp_path):
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const {{ RolloutList }} = await import("./rollout_list.js");
        const api = {{ get: async () => ({{ results: {json.dumps([rollout(2, 1), rollout(1, 1)])}, next_cursor: null }}) }};
        const rollouts = new RolloutList(root, {{ api, runId: 1, rules }});
        await rollouts.reload();
        const list = root.querySelector("[data-rollout-list]");
        const seen = () => ({{ ids: rollouts.items.map((it) => it.id), banner: rollouts.banner.hidden ? null : rollouts.banner.textContent }});
        const out = [];
        rollouts.onLive({json.dumps([rollout(3, 2), rollout(4, 2)])});  // at the top: straight in, newest first
        out.push(seen());
        list.scrollTop = 300;  // reading further down: the rows stay put
        rollouts.onLive({json.dumps([rollout(5, 3), rollout(6, 3)])});
        out.push(seen());
        rollouts.showUnseen();  // the banner's click (or scrolling back up)
        out.push(seen(), list.scrollTop);
        console.log(JSON.stringify(out));
        """,
    )
    at_top, scrolled, shown, scroll_top = got
    assert at_top == {"ids": [4, 3, 2, 1], "banner": None}
    assert scrolled == {"ids": [4, 3, 2, 1], "banner": "2 new rollouts match: show them"}
    assert (shown, scroll_top) == ({"ids": [6, 5, 4, 3, 2, 1], "banner": None}, 0)


def test_a_long_live_list_drops_its_oldest_rows_and_load_more_goes_on_from_the_last_kept(tmp_path):
    first_page = [rollout(1000 - i, (1000 - i) // 8) for i in range(199)]  # ids 1000..802, steps 125..100
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const {{ RolloutList }} = await import("./rollout_list.js");
        const asked = [];
        const api = {{ get: async (path, params) => {{
          asked.push(params);
          return asked.length === 1 ? {{ results: {json.dumps(first_page)}, next_cursor: "c1" }}
                                    : {{ results: {json.dumps([rollout(808, 101), rollout(807, 100), rollout(790, 98)])}, next_cursor: null }};
        }} }};
        const rollouts = new RolloutList(root, {{ api, runId: 1, rules }});
        await rollouts.reload();
        rollouts.onLive({json.dumps([rollout(1001 + i, 126) for i in range(8)])});
        const kept = rollouts.items.length, last = rollouts.items.at(-1).id;
        await rollouts.loadMore();
        console.log(JSON.stringify({{ kept, last, asked: asked[1], ids: rollouts.items.slice(-4).map((it) => it.id) }}));
        """,
    )
    assert (got["kept"], got["last"]) == (200, 809)  # the 8 new on top, the 7 oldest gone (at most 200 rows)
    assert got["asked"]["step_max"] == 101 and "cursor" not in got["asked"]  # rollout 809's step
    assert got["ids"] == [809, 808, 807, 790]  # the gone ones come back after it


def test_show_all_joins_the_windows_of_a_cut_prompt_message_by_message(tmp_path):
    windows = [
        {"value": [{"role": "system", "content": "ab"}, {"role": "user", "content": "Q?"}], "next_offset": 2},
        {"value": [{"role": "system", "content": "cd"}, {"role": "user", "content": ""}], "next_offset": None},
    ]
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const {{ RolloutDetail }} = await import("./rollout_detail.js");
        const windows = {json.dumps(windows)}, asked = [];
        const api = {{ get: async (path, params) => {{ asked.push([path, params]); return windows[asked.length - 1]; }} }};
        const detail = new RolloutDetail(root, {{ api, runId: 1, rules }});
        detail.openId = 7;
        const block = {{ innerHTML: "cut" }};
        const button = {{ dataset: {{ showAll: "prompt", rollout: "7" }}, closest: () => ({{ querySelector: () => block }}),
                          remove() {{ this.removed = true; }} }};
        await detail.showAll(button);
        console.log(JSON.stringify({{ asked, html: block.innerHTML, removed: Boolean(button.removed) }}));
        """,
    )
    assert got["asked"] == [["/api/runs/1/rollouts/7/text/", {"field": "prompt", "offset": 0}],
                            ["/api/runs/1/rollouts/7/text/", {"field": "prompt", "offset": 2}]]  # fmt: skip
    assert "<pre>abcd</pre>" in got["html"] and "<pre>Q?</pre>" in got["html"] and got["removed"]


def test_with_a_text_filter_the_banner_counts_only_the_live_rollouts_the_server_matches(tmp_path):
    # A summary carries previews only, so the server says which new rollouts hold the text; the
    # banner once counted every new rollout whenever a text filter was set.
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        globalThis.FormData = class {{ get(name) {{ return name === "q" ? "needle" : null; }} }};
        const {{ RolloutList }} = await import("./rollout_list.js");
        const asked = [];
        const api = {{ get: async (path, params) => {{
          asked.push(params);
          return {{ results: params.step_min === undefined ? [] : {json.dumps([rollout(7, 4), rollout(2, 4)])}, next_cursor: null }};
        }} }};
        const rollouts = new RolloutList(root, {{ api, runId: 1, rules }});
        await rollouts.reload();
        root.querySelector("[data-rollout-list]").scrollTop = 300;
        rollouts.onLive({json.dumps([rollout(7, 4), rollout(8, 4), rollout(9, 4)])});
        await rollouts.searching;
        console.log(JSON.stringify({{ asked: asked[1], banner: rollouts.banner.textContent, held: rollouts.held.map((it) => it.id) }}));
        """,
    )
    assert got["asked"]["q"] == "needle" and (got["asked"]["step_min"], got["asked"]["step_max"]) == (4, 4)
    assert got["banner"] == "1 new rollout matches: show them" and got["held"] == [7]


CURVES_STUBS = """
globalThis.window = { addEventListener() {} };
globalThis.requestAnimationFrame = (callback) => callback();
globalThis.Plotly = { extendTraces() {}, react() {}, relayout() {} };
"""


def test_live_points_for_steps_already_drawn_are_dropped_in_wall_time_mode_too(tmp_path):
    # REST x is MetricPoint.wall_time; a live event's time is when its event row was written,
    # a little later. Only the step says that they are the same point.
    got = run_js(
        tmp_path,
        CURVES_STUBS
        + """
        const { CurveBoard } = await import("./curves.js");
        const out = {};
        for (const mode of ["step", "time"]) {
          const board = new CurveBoard(null, { api: null, sources: [{ runId: 1, label: "r" }], panels: rules.panels });
          board.xMode = mode;
          const x = mode === "time" ? [100.0, 101.0] : [1, 2];
          board.ingest(1, { keys: ["reward/mean"], series: { "reward/mean": {
            x, y: [0.1, 0.2], y_min: [0.1, 0.2], y_max: [0.1, 0.2], last_step: 2 } } });
          board.push(2, 101.05, { "reward/mean": 0.2 });  // already drawn by the REST load
          board.push(3, 102.0, { "reward/mean": 0.3 });
          board.push(3, 102.0, { "reward/mean": 0.3 });
          const afterLive = [...board.data.get("1|reward/mean").x];
          // a later REST load (zoom out, x-axis switch) that already holds step 3 and more
          board.ingest(1, { keys: ["reward/mean"], series: { "reward/mean": {
            x: mode === "time" ? [100.0, 101.0, 101.98] : [1, 2, 3],
            y: [0.1, 0.2, 0.3], y_min: [0.1, 0.2, 0.3], y_max: [0.1, 0.2, 0.3], last_step: 3 } } });
          board.push(4, 103.0, { "reward/mean": 0.4 });
          out[mode] = { afterLive, afterReload: board.data.get("1|reward/mean").x };
        }
        console.log(JSON.stringify(out));
        """,
    )
    assert got["step"] == {"afterLive": [1, 2, 3], "afterReload": [1, 2, 3, 4]}
    assert got["time"] == {"afterLive": [100.0, 101.0, 102.0], "afterReload": [100.0, 101.0, 101.98, 103.0]}


def panels_of(tmp_path, keys: list[str]) -> list[str]:
    return run_js(
        tmp_path,
        CURVES_STUBS
        + f"""
        const {{ panelDefs, panelFor }} = await import("./curves.js");
        const defs = panelDefs(rules.panels);
        console.log(JSON.stringify({json.dumps(keys)}.map((k) => panelFor(k, defs).id)));
        """,
    )


def test_every_clip_fraction_shares_the_clip_panel(tmp_path):
    keys = ["actor/clip_frac_low", "actor/clip_frac_high", "actor/dual_clip_frac", "actor/loss"]
    assert panels_of(tmp_path, keys) == ["clip", "clip", "clip", "loss"]


def test_the_sampler_trainer_logprob_gap_has_a_panel_of_its_own(tmp_path):
    keys = ["rollout/logprob_gap_mean", "rollout/logprob_gap_max", "rollout/engine_trainer_kl", "rollout/other"]
    got = panels_of(tmp_path, keys)
    assert got[:3] == ["mismatch", "mismatch", "mismatch"] and got[3] != "mismatch"


@pytest.mark.parametrize(
    ("note", "sent"),
    [("", {}), ("*", {"has_note": "1"}), ("reward hacking", {"note_tag": "reward hacking"})],
    ids=["no-note-filter", "any-note", "one-tag"],
)
def test_the_notes_select_asks_for_any_note_or_one_tag_and_live_rollouts_never_match_it(tmp_path, note, sent):
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const form = {{ note: {json.dumps(note)}, order: "-advantage" }};
        globalThis.FormData = class {{ get(name) {{ return form[name] ?? null; }} }};
        const {{ RolloutFilters }} = await import("./rollout_filters.js");
        const filters = new RolloutFilters(root.querySelector("form.filters"), {{ rules }});
        const params = filters.params();
        console.log(JSON.stringify({{ params, live: filters.matches({json.dumps(rollout(9, 4))}, params) }}));
        """,
    )
    assert got["params"] == {"order": "-advantage", **sent}
    assert got["live"] is (not sent)  # a rollout that just arrived carries no note yet


def test_the_js_puts_every_trainer_metric_in_the_panel_the_server_names(tmp_path):
    keys = sorted(trainer_metric_keys() | {"custom/score", "plain"})
    # No panel claims a key: the page gives it its namespace's panel ("other" for a key without one).
    want = [panel.id if (panel := panel_for(k)) else f"ns-{k.split('/')[0] if '/' in k else 'other'}" for k in keys]
    assert panels_of(tmp_path, keys) == want


def test_the_timing_panel_is_the_one_drawn_stacked(tmp_path):
    got = run_js(
        tmp_path,
        CURVES_STUBS
        + """
        const { panelDefs, panelFor } = await import("./curves.js");
        const defs = panelDefs(rules.panels);
        console.log(JSON.stringify(["timing/train_s", "timing/step_s"].map((k) => Boolean(panelFor(k, defs).stacked))));
        """,
    )
    assert got == [True, False]


# Forms as the rollout list's filter bar fills them (prompt_id is an API filter the bar has no field for;
# prompt, a row's rollouts with its repeats, is the field the prompts view's links fill).
LIVE_FORMS = [
    {}, {"step_min": "2", "step_max": "4"}, {"reward_min": "0.5"}, {"reward_max": "0"},
    {"finish_reason": "length"}, {"trained": "0"}, {"trained": "1", "step_min": "1"}, {"prompt_id": "p3"},
    {"prompt": "p3"}, {"prompt": "p3", "prompt_id": "p3@2"}, {"prompt": "p"},
    {"criterion": "correct", "score_min": "0.5"}, {"criterion": "style", "score_max": "0.3"},
    {"score_min": "1"},  # no criterion: the bar drops the score range, which the API would refuse
    {"note": "*"}, {"note": "good"}, {"order": "-reward", "reward_min": "0.5", "finish_reason": "stop"},
]  # fmt: skip


def test_a_live_rollout_passes_the_filters_exactly_when_the_server_would_list_it(tmp_path, db):
    run = Run.objects.create(team=Team.objects.create(name="t"), name="r", spec={})
    rows = []
    for i in range(12):
        scores = {"correct": (i % 3) / 2} | ({"style": (i % 4) / 4} if i % 2 else {})
        # Row p3 is drawn twice in step 3 (its second group "p3@2"), and "p3x" is another row.
        prompt_id = {7: "p3@2", 9: "p3x"}.get(i, f"p{i // 2}")
        row = Rollout.objects.create(run=run, step=i // 2, prompt_id=prompt_id, sample_index=i % 2, run_prompt=prompt_of(run, ""),
                                     completion="x", preview="x", reward=[0.0, 0.5, 1.0][i % 3],
                                     finish_reason="length" if i % 4 == 0 else "stop", trained=i % 5 != 0,
                                     scores={c: {"score": v} for c, v in scores.items()})  # fmt: skip
        RolloutScore.objects.bulk_create(
            RolloutScore(rollout=row, run=run, criterion=c, score=v) for c, v in scores.items()
        )
        rows.append(row)
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        let form = {{}};
        globalThis.FormData = class {{ get(name) {{ return form[name] ?? null; }} }};
        const {{ RolloutFilters }} = await import("./rollout_filters.js");
        const filters = new RolloutFilters(root.querySelector("form.filters"), {{ rules }});
        const rollouts = {json.dumps([r.summary() for r in rows])};
        console.log(JSON.stringify({json.dumps(LIVE_FORMS)}.map((f) => {{
          form = f;
          const params = filters.params();
          return {{ params, ids: rollouts.filter((it) => filters.matches(it, params)).map((it) => it.id) }};
        }})));
        """,
    )
    for form, shown in zip(LIVE_FORMS, got, strict=True):
        listed = rollout_query.page(run.pk, QueryDict(urlencode({**shown["params"], "limit": 500})))["results"]
        assert sorted(shown["ids"]) == sorted(r["id"] for r in listed), form
    assert {len(shown["ids"]) for shown in got} > {0, len(rows)}  # the forms keep none, all, and some in between


def test_the_rollout_note_form_takes_its_quick_tags_and_limits_from_the_rules(tmp_path):
    html = run_js(
        tmp_path,
        FAKE_DOM
        + """
        const { RolloutDetail } = await import("./rollout_detail.js");
        console.log(JSON.stringify(new RolloutDetail(root, { api: null, runId: 1, rules }).noteForm()));
        """,
    )
    notes = RULES["notes"]
    assert re.findall(r'data-tag="([^"]*)"', html) == notes["quick_tags"] == ["reward hacking", "format broken", "good"]
    assert f'maxlength="{notes["tag_max"]}"' in html and f'maxlength="{notes["text_max"]}"' in html


def test_without_the_servers_rules_the_modules_say_what_is_missing(tmp_path):
    errors = run_js(
        tmp_path,
        FAKE_DOM
        + CURVES_STUBS
        + """
        const { RolloutList } = await import("./rollout_list.js");
        const { RolloutDetail } = await import("./rollout_detail.js");
        const { CurveBoard } = await import("./curves.js");
        const { readRules } = await import("./api.js");
        document.getElementById = () => null;  // a page rendered without the client-rules JSON
        const tries = [
          () => new RolloutList(root, { api: null, runId: 1 }),
          () => new RolloutDetail(root, { api: null, runId: 1 }),
          () => new CurveBoard(null, { api: null, sources: [] }),
          () => readRules(),
        ];
        console.log(JSON.stringify(tries.map((make) => { try { make(); return null; } catch (err) { return err.message; } })));
        """,
    )
    rollouts, detail, board, page = errors
    assert "RolloutList needs the server's" in rollouts and "client-rules" in rollouts
    assert "RolloutDetail needs the server's" in detail and "client-rules" in detail
    assert "CurveBoard needs the server's panel rules" in board
    assert "client-rules" in page and "{% client_rules as rules %}" in page


def episode(id_, turns, tools, errors, at_limit):
    return {**rollout(id_, 1), "num_turns": turns, "tool_calls": len(tools), "tool_errors": errors,
            "tools_used": tools, "ended_at_limit": at_limit}  # fmt: skip


@pytest.mark.parametrize(
    ("form", "want"),
    [
        ({"turns_min": "2"}, [1, 2]),
        ({"turns_max": "1"}, [3]),
        ({"tool": "python"}, [1]),
        ({"tool": "calc"}, []),  # a whole name
        ({"tool_errors": "1"}, [1]),
        ({"tool_errors": "0"}, [2, 3]),
        ({"ended_at_limit": "true"}, [2]),
        ({"ended_at_limit": "1", "tool": "calculator"}, [2]),
    ],
)
def test_live_episodes_pass_the_turn_and_tool_filters_as_the_server_applies_them(tmp_path, form, want):
    live = [episode(1, 3, ["calculator", "python"], 1, False), episode(2, 2, ["calculator"], 0, True),
            episode(3, 1, [], 0, False)]  # fmt: skip
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const form = {json.dumps(form)};
        globalThis.FormData = class {{ get(name) {{ return form[name] ?? null; }} }};
        const {{ RolloutFilters }} = await import("./rollout_filters.js");
        const filters = new RolloutFilters(root.querySelector("form.filters"), {{ rules }});
        const params = filters.params();
        console.log(JSON.stringify({{ params, hits: {json.dumps(live)}.filter((it) => filters.matches(it, params)).map((it) => it.id) }}));
        """,
    )
    assert got["params"] == form  # each one is a parameter the server reads (its rules name it)
    assert got["hits"] == want


@pytest.mark.parametrize(
    ("split", "live"),
    [("", ["train"]), ("train", ["train"]), ("validation", ["validation"]), ("eval", ["eval"]),
     ("all", ["train", "validation", "eval"])],
    ids=["default", "training", "validation", "evaluation", "all"],
)  # fmt: skip
def test_live_rollouts_pass_the_split_filter_as_the_server_applies_it(tmp_path, split, live):
    # Empty: the server's default (training), as a client that sends no split gets.
    # The third: an evaluation run's sample (its page opens on ?split=eval).
    items = [{**rollout(9, 0), "split": "train"}, {**rollout(9, 1), "split": "validation"},
             {**rollout(9, 2), "split": "eval"}]  # fmt: skip
    got = run_js(
        tmp_path,
        FAKE_DOM
        + f"""
        const form = {{ split: {json.dumps(split)} }};
        globalThis.FormData = class {{ get(name) {{ return form[name] ?? null; }} }};
        const {{ RolloutFilters }} = await import("./rollout_filters.js");
        const filters = new RolloutFilters(root.querySelector("form.filters"), {{ rules }});
        const params = filters.params();
        console.log(JSON.stringify({json.dumps(items)}.filter((it) => filters.matches(it, params)).map((it) => it.split)));
        """,
    )
    assert got == live


def test_the_keyset_pager_goes_on_from_each_cursor_and_drops_what_a_reset_overtook(tmp_path):
    # The rollout list and the prompts table page through keyset_pager.js: each page from the cursor
    # the page before gave out; a page (or its failure) asked for before a reset no longer follows
    # the rows shown; readFirst reads from the start until it holds the rows wanted.
    got = run_js(
        tmp_path,
        """
        const { KeysetPager } = await import("./keyset_pager.js");
        const pages = { "": { results: [1, 2], next_cursor: "c1" }, c1: { results: [3, 4], next_cursor: "c2" },
                        c2: { results: [5], next_cursor: null } };
        const asked = [];
        const pager = new KeysetPager(async (cursor) => { asked.push(cursor); return pages[cursor ?? ""]; });
        const out = {};
        out.pages = [(await pager.next(true)).results, (await pager.next()).results];
        out.moreAfterTwo = pager.hasMore;
        out.pages.push((await pager.next()).results);
        out.moreAtEnd = pager.hasMore;
        out.again = (await pager.readFirst(3)).results;
        out.cursorAfterAgain = pager.cursor;
        out.asked = asked;

        const answers = [];
        const slow = new KeysetPager(() => new Promise((resolve, reject) => answers.push({ resolve, reject })));
        const overtaken = slow.next(true);
        slow.reset();
        answers[0].resolve({ results: [9], next_cursor: "late" });
        const failed = slow.next(true);
        slow.reset();
        answers[1].reject(new Error("the old filters' page failed"));
        const current = slow.next(true);
        answers[2].reject(new Error("the page failed"));
        out.overtaken = await overtaken;
        out.failedOvertaken = await failed;
        out.cursorAfterOvertaken = slow.cursor;
        out.currentError = await current.then(() => null, (err) => err.message);
        const reread = slow.readFirst(10);
        slow.reset();
        answers[3].resolve({ results: [1], next_cursor: null });
        out.rereadOvertaken = await reread;
        console.log(JSON.stringify(out));
        """,
    )
    assert got["pages"] == [[1, 2], [3, 4], [5]] and got["moreAfterTwo"] and not got["moreAtEnd"]
    assert got["again"] == [1, 2, 3, 4] and got["cursorAfterAgain"] == "c2"  # two pages hold the 3 wanted
    assert got["asked"] == [None, "c1", "c2", None, "c1"]
    assert got["overtaken"] is None and got["failedOvertaken"] is None and got["cursorAfterOvertaken"] is None
    assert got["currentError"] == "the page failed"
    assert got["rereadOvertaken"] is None
