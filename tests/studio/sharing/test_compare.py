"""Compare: the settings that differ between runs, for members of every run's team."""

from studio.accounts.models import Team
from studio.runs.models import Run
from studio.sharing.compare import differences, flatten

SPEC = {
    "model": {"path": "tiny"},
    "algorithm": {"kl_beta": 0.04, "group_size": 8},
    "rubric": {"criteria": [{"name": "correct", "weight": 1.0}], "combine": "weighted_sum"},
}


def test_flatten_walks_criteria_by_index():
    assert flatten(SPEC)["rubric.criteria[0].weight"] == 1.0
    assert flatten({"rollout": {"stop": ["\n\n"]}}) == {"rollout.stop": ["\n\n"]}


def test_only_settings_that_differ_are_listed_in_run_order():
    other = {**SPEC, "algorithm": {"kl_beta": 0.0, "group_size": 8, "dynamic_sampling": True}}
    rows = differences([SPEC, other])
    assert rows == [
        {"path": "algorithm.dynamic_sampling", "values": [None, True]},
        {"path": "algorithm.kl_beta", "values": [0.04, 0.0]},
    ]


def test_identical_specs_have_no_differences():
    assert differences([SPEC, dict(SPEC)]) == []


def test_the_compare_api_returns_runs_and_differences(api, alice, team):
    a = Run.objects.create(team=team, name="grpo", spec=SPEC)
    b = Run.objects.create(team=team, name="dapo", spec={**SPEC, "algorithm": {"kl_beta": 0.0, "group_size": 8}})
    api.force_authenticate(alice)
    body = api.get(f"/api/compare/?runs={a.pk},{b.pk}").json()
    assert [r["name"] for r in body["runs"]] == ["grpo", "dapo"]
    assert body["differences"] == [{"path": "algorithm.kl_beta", "values": [0.04, 0.0]}]


def test_a_run_of_another_team_makes_it_404(api, alice, team):
    mine = Run.objects.create(team=team, name="mine", spec=SPEC)
    theirs = Run.objects.create(team=Team.objects.create(name="B"), name="theirs", spec=SPEC)
    api.force_authenticate(alice)
    assert api.get(f"/api/compare/?runs={mine.pk},{theirs.pk}").status_code == 404


def test_it_names_the_runs_parameter_when_it_is_wrong(api, alice):
    api.force_authenticate(alice)
    resp = api.get("/api/compare/?runs=1,x")
    assert resp.status_code == 400
    assert "runs" in resp.json()
    assert api.get("/api/compare/").status_code == 400
