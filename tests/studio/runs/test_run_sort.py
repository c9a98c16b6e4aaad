"""The runs list sorted by a metric's last value (studio.runs.run_sort; issue 40: "the runs list can sort by" a
suite's `suite/<task>/...` scores), on the API and the page: the value at each run's highest step orders it, runs
without the metric come last, another team's runs stay out, it costs the list no query per run (the index on
(run, key, step) answers each run's value), and a key no metric can have is a 400 naming `sort`."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from studio.accounts.models import Team
from studio.runs import run_sort
from studio.runs.models import MetricPoint, Run

KEY = "suite/sums/pass@1"


@pytest.fixture
def runs(team, alice):
    """rising: 0.2 at step 10, then 0.9 at step 20 (its last); flat: 0.5; unscored: no such metric (another key
    only); and an outsider team's run with the best score of all."""
    made = {name: Run.objects.create(team=team, name=name, spec={}, created_by=alice)
            for name in ("rising", "flat", "unscored")}  # fmt: skip
    made["outsider"] = Run.objects.create(team=Team.objects.create(name="other"), name="outsider", spec={})
    points = [("rising", 10, KEY, 0.2), ("rising", 20, KEY, 0.9), ("flat", 30, KEY, 0.5), ("unscored", 5, "reward/mean", 7.0),
              ("outsider", 1, KEY, 1.0), ("rising", 20, "suite/sums/pass@4", 0.0)]  # fmt: skip
    MetricPoint.objects.bulk_create(MetricPoint(run=made[name], step=step, key=key, value=value, wall_time=0.0)
                                    for name, step, key, value in points)  # fmt: skip
    return made


def names(api, **params) -> list[str]:
    response = api.get("/api/runs/", params)
    assert response.status_code == 200, response.json()
    return [r["name"] for r in response.json()["results"]]


def test_the_api_sorts_by_the_last_value_either_way_with_runs_lacking_it_last(api, alice, runs):
    api.force_authenticate(alice)
    assert names(api, sort=f"-{KEY}") == ["rising", "flat", "unscored"]
    assert names(api, sort=KEY) == ["flat", "rising", "unscored"]  # rising's last value (0.9), not its first (0.2)
    assert names(api) == ["unscored", "flat", "rising"]  # newest first, as before
    assert names(api, sort="-no/such/metric") == ["unscored", "flat", "rising"]
    assert names(api, sort=f"-{KEY}", state="queued") == ["rising", "flat", "unscored"]  # filters still apply


def test_sorting_adds_no_query_per_run_and_reads_the_metric_index(api, alice, runs):
    api.force_authenticate(alice)
    with CaptureQueriesContext(connection) as plain:
        names(api)
    with CaptureQueriesContext(connection) as sorted_list:
        names(api, sort=f"-{KEY}")
    assert len(sorted_list) == len(plain)
    if connection.vendor == "sqlite":  # PostgreSQL's planner may scan three rows' table instead: its plan differs
        plan = run_sort.by_metric(Run.objects.all(), f"-{KEY}").explain()
        index = MetricPoint._meta.indexes[0].name
        assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, plan


@pytest.mark.parametrize("bad", ["-", "--suite/sums/pass@1", "x" * 201, "suite/\x01/pass@1"])
def test_a_key_no_metric_can_have_is_a_400_naming_sort(api, alice, runs, bad):
    api.force_authenticate(alice)
    response = api.get("/api/runs/", {"sort": bad})
    assert response.status_code == 400
    assert list(response.json()) == ["sort"]


def test_the_page_sorts_and_shows_each_run_s_value_in_a_column(alice, runs):
    client = Client()
    client.force_login(alice)
    page = client.get("/runs/", {"sort": f"-{KEY}"}).content.decode()
    assert f'data-column="last:{KEY}"' in page  # the runs table's column (studio.runs.table)
    order = [page.index(f">{name}</a>") for name in ("rising", "flat", "unscored")]
    assert order == sorted(order) and ">outsider</a>" not in page
    assert page.count("data-cell>") == 3 and "data-cell>0.9<" in page and "data-cell>0.5<" in page
    refused = client.get("/runs/", {"sort": "-"})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert "data-table-error" in text and "must name a metric key" in text and ">rising</a>" in text
