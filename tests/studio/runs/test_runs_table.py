"""The runs table (studio.runs.table; issue 41 "many runs at a glance") on fixtures whose numbers are worked out by
hand below: metric columns (last, best by direction, max, min, at step N), setting columns, sorting on any of them,
filters on settings (equal, range), tags, experiments and ids, seed groups' mean / sample std / n, the query count
not growing with the rows, and bad parameters answered 400 naming the parameter (the API) or said on the page.

The fixture (alice's team; charlie's team has one run of its own):

    run      optim.lr  optim.seed  reward/mean at steps 1, 2, 3   actor/loss at 1, 3   tags
    a1       1e-3      1           0.1  0.5  0.5 (last)             2.0  1.0             baseline
    a2       1e-3      2           0.3  0.9  0.7                    3.0  0.5
    a3       1e-3      3           0.2  0.6  0.9                    1.5  0.25            baseline keep
    b1       1e-4      1           0.6  0.1  0.2                    -
    b2       1e-4      2           0.0  0.3  0.4                    -
    c        3e-4      1           -                                -

Seed group a: reward/mean last 0.5, 0.7, 0.9: mean 0.7, sample std sqrt(((-.2)^2 + 0 + .2^2) / 2) = 0.2, n 3;
best (max, reward is better high) 0.5, 0.9, 0.9: mean 0.7667, std sqrt((.0711 + .0178 + .0178) / 2) = 0.2309;
actor/loss best (min, loss is better low) 1.0, 0.5, 0.25: mean 0.5833.
Seed group b: last 0.2, 0.4: mean 0.3, std sqrt(.01 + .01) = 0.1414, n 2; c: alone, no reward (n 0)."""

from __future__ import annotations

import math
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.accounts.models import Team
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs import table
from studio.runs.metric_direction import higher_is_better
from studio.runs.models import MetricPoint, Run, RunTag
from studio.runs.tags import set_tags

REWARD, LOSS = "reward/mean", "actor/loss"
CURVES = {
    "a1": ([0.1, 0.5, 0.5], [2.0, None, 1.0]),
    "a2": ([0.3, 0.9, 0.7], [3.0, None, 0.5]),
    "a3": ([0.2, 0.6, 0.9], [1.5, None, 0.25]),
    "b1": ([0.6, 0.1, 0.2], None),
    "b2": ([0.0, 0.3, 0.4], None),
    "c": (None, None),
}
SETTINGS = {"a1": (1e-3, 1), "a2": (1e-3, 2), "a3": (1e-3, 3), "b1": (1e-4, 1), "b2": (1e-4, 2), "c": (3e-4, 1)}


def spec(lr: float, seed: int) -> dict:
    return {"model": {"path": "/models/tiny"}, "optim": {"lr": lr, "seed": seed, "total_steps": 3},
            "algorithm": {"kl_beta": 0.0}}  # fmt: skip


@pytest.fixture
def experiments(team, alice):
    rubric = Rubric.objects.create(team=team, name="Correct", spec={"criteria": []}, created_by=alice)
    return [Experiment.objects.create(team=team, name=f"exp-{i}", rubric=rubric, model_path="/models/tiny",
                                      config={}, created_by=alice) for i in (1, 2)]  # fmt: skip


@pytest.fixture
def runs(team, alice, experiments):
    made = {}
    for name, (lr, seed) in SETTINGS.items():
        experiment = experiments[0] if name.startswith("a") else experiments[1]
        made[name] = Run.objects.create(team=team, experiment=experiment, name=name, spec=spec(lr, seed),
                                        created_by=alice, state="succeeded", last_step=3, total_steps=3)  # fmt: skip
    points = []
    for name, (reward, loss) in CURVES.items():
        for key, values in ((REWARD, reward), (LOSS, loss)):
            for step, value in enumerate(values or [], start=1):
                if value is not None:
                    points.append(MetricPoint(run=made[name], step=step, key=key, value=value, wall_time=float(step)))
    outsider = Run.objects.create(team=Team.objects.create(name="other"), name="outsider", spec=spec(1e-3, 4))
    points.append(MetricPoint(run=outsider, step=3, key=REWARD, value=99.0, wall_time=3.0))
    MetricPoint.objects.bulk_create(points)
    set_tags(made["a1"], ["baseline"])
    set_tags(made["a3"], ["baseline", "keep"])
    return made


def listed(api, **params) -> list[dict]:
    response = api.get("/api/runs/", params)
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def names(api, **params) -> list[str]:
    return [r["name"] for r in listed(api, **params)]


def test_metric_direction_guesses_from_the_key():
    assert higher_is_better("reward/mean") and higher_is_better("suite/sums/pass@1")
    assert not higher_is_better("actor/loss") and not higher_is_better("actor/kl")
    assert not higher_is_better("timing/step_s") and not higher_is_better("response/truncated_frac")


def test_metric_columns_read_last_best_max_min_and_at_a_step(api, alice, runs):
    api.force_authenticate(alice)
    cols = ["last:reward/mean", "best:reward/mean", "min:reward/mean", "at2:reward/mean", "best:actor/loss",
            "max:actor/loss", "set:optim.lr", "set:optim.seed"]  # fmt: skip
    rows = {r["name"]: r["columns"] for r in listed(api, col=cols)}
    assert set(rows) == set(SETTINGS)  # never the outsider's run
    assert rows["a2"] == {"last:reward/mean": 0.7, "best:reward/mean": 0.9, "min:reward/mean": 0.3,
                          "at2:reward/mean": 0.9, "best:actor/loss": 0.5, "max:actor/loss": 3.0,
                          "set:optim.lr": 1e-3, "set:optim.seed": 2}  # fmt: skip
    assert rows["c"]["last:reward/mean"] is None and rows["c"]["set:optim.lr"] == 3e-4
    # at step N: the last value at or before N (a1 reports no loss at step 2: its step-1 value)
    assert listed(api, col="at2:actor/loss", ids=str(runs["a1"].pk))[0]["columns"] == {"at2:actor/loss": 2.0}


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("-last:reward/mean", ["a3", "a2", "a1", "b2", "b1", "c"]),
        ("last:reward/mean", ["b1", "b2", "a1", "a2", "a3", "c"]),  # runs without it last, ascending too
        ("-best:reward/mean", ["a3", "a2", "b1", "a1", "b2", "c"]),  # a2 and a3 both 0.9: ties newest first
        ("best:actor/loss", ["a3", "a2", "a1", "c", "b2", "b1"]),  # the lowest loss first; no loss: newest first
        ("set:optim.lr", ["b2", "b1", "c", "a3", "a2", "a1"]),
        ("-at1:reward/mean", ["b1", "a2", "a3", "a1", "b2", "c"]),
        ("run:name", ["a1", "a2", "a3", "b1", "b2", "c"]),
        ("-reward/mean", ["a3", "a2", "a1", "b2", "b1", "c"]),  # run_sort's bare key: its last value
    ],
)
def test_any_column_sorts_with_missing_values_last(api, alice, runs, sort, expected):
    api.force_authenticate(alice)
    assert names(api, sort=sort) == expected


def test_filters_on_settings_tags_experiments_and_ids(api, alice, runs, experiments):
    api.force_authenticate(alice)
    assert set(names(api, **{"set.optim.lr": "0.001"})) == {"a1", "a2", "a3"}
    assert set(names(api, **{"set.optim.lr": "1e-3"})) == {"a1", "a2", "a3"}  # the number, however written
    assert set(names(api, **{"set.optim.lr": "1e-4..3e-4"})) == {"b1", "b2", "c"}
    assert set(names(api, **{"set.optim.lr": "2e-4.."})) == {"a1", "a2", "a3", "c"}
    assert set(names(api, **{"set.optim.seed": "1", "set.optim.lr": "..5e-4"})) == {"b1", "c"}
    assert set(names(api, **{"set.model.path": "/models/tiny"})) == set(SETTINGS)
    assert names(api, **{"set.model.path": "/models/other"}) == []
    assert set(names(api, tag="baseline")) == {"a1", "a3"}
    assert names(api, tag=["baseline", "keep"]) == ["a3"]  # every tag named
    assert set(names(api, experiment=str(experiments[1].pk))) == {"b1", "b2", "c"}
    assert len(names(api, experiment=f"{experiments[0].pk},{experiments[1].pk}")) == 6
    assert set(names(api, ids=f"{runs['a1'].pk},{runs['c'].pk}")) == {"a1", "c"}


def by_members(groups: list[dict], runs) -> dict[frozenset, dict]:
    ids = {run.pk: name for name, run in runs.items()}
    return {frozenset(ids[i] for i in g["members"]): g for g in groups}


def test_seed_repeats_group_into_one_row_with_mean_std_and_n(api, alice, charlie, runs):
    api.force_authenticate(alice)
    response = api.get("/api/runs/groups/", {"col": ["last:reward/mean", "best:reward/mean",
                                      "best:actor/loss", "set:optim.lr", "set:optim.seed"]})  # fmt: skip
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["count"] == 3
    groups = by_members(body["results"], runs)
    assert set(groups) == {frozenset({"a1", "a2", "a3"}), frozenset({"b1", "b2"}), frozenset({"c"})}
    a = groups[frozenset({"a1", "a2", "a3"})]["columns"]
    assert a["last:reward/mean"]["mean"] == pytest.approx(0.7) and a["last:reward/mean"]["n"] == 3
    assert a["last:reward/mean"]["std"] == pytest.approx(0.2)
    assert a["best:reward/mean"]["mean"] == pytest.approx((0.5 + 0.9 + 0.9) / 3)
    assert a["best:reward/mean"]["std"] == pytest.approx(
        math.sqrt(((0.5 - 23 / 30) ** 2 + 2 * (0.9 - 23 / 30) ** 2) / 2)
    )
    assert a["best:actor/loss"]["mean"] == pytest.approx((1.0 + 0.5 + 0.25) / 3)
    assert a["set:optim.lr"] == 1e-3 and a["set:optim.seed"] == [1, 2, 3]
    b = groups[frozenset({"b1", "b2"})]["columns"]["last:reward/mean"]
    assert (b["mean"], b["std"], b["n"]) == (pytest.approx(0.3), pytest.approx(math.sqrt(0.02)), 2)
    c = groups[frozenset({"c"})]["columns"]["last:reward/mean"]
    assert c == {"mean": None, "std": None, "n": 0}
    api.force_authenticate(charlie)  # another team's owner: none of them, in groups or not
    assert api.get("/api/runs/groups/").json()["count"] == 0 and names(api) == []


def test_groups_sort_by_their_mean_and_page(api, alice, runs):
    api.force_authenticate(alice)
    body = api.get("/api/runs/groups/", {"sort": "-last:reward/mean"}).json()
    assert [len(g["members"]) for g in body["results"]] == [3, 2, 1]  # 0.7, 0.3, none
    body = api.get("/api/runs/groups/", {"sort": "last:reward/mean", "limit": 1, "offset": 1}).json()
    assert body["count"] == 3 and [len(g["members"]) for g in body["results"]] == [3]  # 0.3, [0.7], none
    assert api.get("/api/runs/groups/", {"sort": "set:optim.seed"}).status_code == 400


def test_the_module_takes_any_queryset_of_runs(runs):
    """What a sweep's page does: the table over its trials, here a1, b1 and b2."""
    query = table.grouped(table.parse({"col": "last:reward/mean", "sort": "-last:reward/mean"}))
    page = table.page(Run.objects.filter(name__in=["a1", "b1", "b2"]), query)
    assert [[r.run.name for r in row.members] for row in page.rows] == [["a1"], ["b1", "b2"]]  # 0.5, then 0.3
    assert page.rows[0].values == [pytest.approx(0.5)] and page.rows[0].spread == [None]  # one run: no spread
    assert page.rows[1].spread == [pytest.approx(math.sqrt(0.02))] and page.rows[1].counts == [2]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"col": "best"}, "col"),
        ({"col": "avg:reward/mean"}, "col"),
        ({"col": "set:optim..lr"}, "col"),
        ({"col": "set:optim.lr;drop"}, "col"),
        ({"col": "run:password"}, "col"),
        ({"col": "at-3:reward/mean"}, "col"),
        ({"sort": "--reward/mean"}, "sort"),
        ({"sort": "set:"}, "sort"),
        ({"set.optim.lr": "1e-3..x"}, "set.optim.lr"),
        (
            {
                "set.optim.lr": "..",
            },
            "set.optim.lr",
        ),
        ({"set.optim.lr": "1..0"}, "set.optim.lr"),
        ({"set.optim.lr": "nan..1"}, "set.optim.lr"),
        ({"set.": "1"}, "set."),
        ({"experiment": "3,x"}, "experiment"),
        ({"ids": "-1"}, "ids"),
        ({"ids": "99999999999999999999"}, "ids"),
        ({"tag": "x" * 41}, "tag"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_parameter(api, alice, runs, params, field):
    api.force_authenticate(alice)
    response = api.get("/api/runs/", params)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


@pytest.mark.parametrize(("params", "said"), [({"col": "avg:reward/mean"}, "avg:reward/mean"),
                                              ({"group": "lr"}, "the only grouping is group=seed"),
                                              ({"page": "0"}, "page: must be 1 or more")])  # fmt: skip
def test_the_page_says_a_bad_parameter_above_the_table(alice, runs, params, said):
    client = Client()
    client.force_login(alice)
    response = client.get("/runs/", params)
    assert response.status_code == 400
    text = response.content.decode()
    assert said in text and "data-table-error" in text and ">a1</a>" in text  # the runs, newest first


def _make_runs(team, alice, count: int, start: int) -> None:
    made = Run.objects.bulk_create(Run(team=team, name=f"bulk-{start + i}", spec=spec(1e-3, start + i),
                                       state="succeeded", created_by=alice) for i in range(count))  # fmt: skip
    MetricPoint.objects.bulk_create(MetricPoint(run=run, step=s, key=REWARD, value=s / 10, wall_time=0.0)
                                    for run in made for s in (1, 2))  # fmt: skip
    RunTag.objects.bulk_create(RunTag(run=run, name="bulk") for run in made)


@pytest.mark.parametrize("group", ["", "seed"])
def test_the_query_count_does_not_grow_with_the_rows(alice, team, runs, group):
    client = Client()
    client.force_login(alice)
    params = {"col": ["last:reward/mean", "best:reward/mean", "set:optim.lr"], "sort": "-best:reward/mean",
              "tag": "bulk", "group": group}  # fmt: skip
    counts = []
    for extra in (3, 30):
        _make_runs(team, alice, extra, start=100 * extra)
        with CaptureQueriesContext(connection) as page_queries:
            assert client.get("/runs/", params).status_code == 200
        with CaptureQueriesContext(connection) as api_queries:
            assert client.get("/api/runs/groups/" if group else "/api/runs/", params).status_code == 200
        counts.append((len(page_queries), len(api_queries)))
    assert counts[0] == counts[1], counts


def test_a_seed_group_s_band_per_step_checked_by_hand(api, carol, charlie, runs):
    """Group a at step 1: 0.1, 0.3, 0.2 (mean 0.2, sample std 0.1); step 2: 0.5, 0.9, 0.6; step 3: 0.5, 0.7, 0.9."""
    api.force_authenticate(carol)  # a viewer reads it
    ids = ",".join(str(runs[n].pk) for n in ("a1", "a2", "a3"))
    body = api.get("/api/runs/band/", {"ids": ids, "key": REWARD}).json()
    assert body["step"] == [1, 2, 3] and body["n"] == [3, 3, 3]
    assert body["mean"] == pytest.approx([0.2, 2.0 / 3, 0.7])
    assert body["std"] == pytest.approx(
        [0.1, math.sqrt(((0.5 - 2 / 3) ** 2 + (0.9 - 2 / 3) ** 2 + (0.6 - 2 / 3) ** 2) / 2), 0.2]
    )
    assert body["min"] == pytest.approx([0.1, 0.5, 0.5]) and body["max"] == pytest.approx([0.3, 0.9, 0.9])
    one = api.get("/api/runs/band/", {"ids": ids, "key": REWARD, "points": 1}).json()  # one bucket of all 9 points
    assert one["step"] == [1] and one["mean"] == pytest.approx([sum([0.1, 0.5, 0.5, 0.3, 0.9, 0.7, 0.2, 0.6, 0.9]) / 9])
    outsider = Run.objects.get(name="outsider").pk
    assert api.get("/api/runs/band/", {"ids": f"{ids},{outsider}", "key": REWARD}).status_code == 404
    api.force_authenticate(charlie)
    assert api.get("/api/runs/band/", {"ids": ids, "key": REWARD}).status_code == 404
    for bad in ({"ids": "", "key": REWARD}, {"ids": ids}, {"ids": ids, "key": REWARD, "points": 0}):
        assert api.get("/api/runs/band/", bad).status_code == 400


def test_compare_names_the_seed_groups_and_only_the_settings_that_differ(api, alice, runs):
    api.force_authenticate(alice)
    chosen = [runs[n].pk for n in ("a1", "b1", "a2", "a3")]
    body = api.get("/api/compare/", {"runs": ",".join(map(str, chosen))}).json()
    assert body["groups"] == [[runs["a1"].pk, runs["a2"].pk, runs["a3"].pk], [runs["b1"].pk]]
    assert {d["path"]: d["values"] for d in body["differences"]} == {"optim.lr": [1e-3, 1e-4, 1e-3, 1e-3],
                                                                     "optim.seed": [1, 1, 2, 3]}  # fmt: skip


@given(
    column=st.from_regex(table.COLUMN_PATTERN, fullmatch=True),
    sort=st.from_regex(table.SORT_PATTERN, fullmatch=True),
    ids=st.from_regex(table.IDS_PATTERN, fullmatch=True),
    tag=st.from_regex(table.TAG_PATTERN, fullmatch=True),
)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_what_the_schema_s_patterns_accept_the_parser_takes(column, sort, ids, tag):
    """The API schema states the table's rules (COLUMN_PATTERN...): whatever they accept parses, no 400 left unstated."""
    query = table.parse({"col": column, "sort": sort, "ids": ids, "experiment": ids, "tag": tag})
    assert query.columns[0] == table.parse_column(column)
    for bad in ("avg:x", "set:a..b", "run:id"):
        assert not re.fullmatch(table.COLUMN_PATTERN, bad)
