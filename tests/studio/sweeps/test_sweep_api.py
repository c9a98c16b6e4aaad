"""/api/sweeps/ and the sweep pages: who may do what (alice owns, bob edits, carol views, charlie is of
another team: 404 for him everywhere), bad input refused naming the field, a trial made an experiment."""

from __future__ import annotations

import pytest
from django.test import Client

from studio.experiments.models import Experiment
from studio.sweeps import driver
from studio.sweeps.models import Sweep
from tests.studio.sweeps.conftest import LR_AND_GROUP

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"parameters": LR_AND_GROUP, "sampler": "random", "max_trials": 3, "max_concurrent": 1}


def as_user(api, user):
    api.force_authenticate(user)
    return api


@pytest.fixture
def sweep(api, experiment, alice):
    answer = as_user(api, alice).post("/api/sweeps/", {**BODY, "experiment": experiment.pk}, format="json")
    assert answer.status_code == 201, answer.json()
    assert driver.drive(answer.json()["id"])  # as the next worker heartbeat does
    return Sweep.objects.get(pk=answer.json()["id"])


def test_an_editor_creates_a_sweep_whose_first_trial_is_queued(api, experiment, bob):
    answer = as_user(api, bob).post("/api/sweeps/", {**BODY, "experiment": experiment.pk, "name": "lr"}, format="json")
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert body["name"] == "lr" and body["team"] == experiment.team_id and body["state"] == "active"
    assert body["objective"] == "val/reward/mean" and body["direction"] == "maximize"
    assert body["trials"] == [] and body["summary"]["limit"] == 3  # the driver launches them
    page = Client()
    page.force_login(bob)
    assert "No trial yet" in page.get(f"/sweeps/{body['id']}/").content.decode()  # before its study exists
    driver.drive(body["id"])
    body = api.get(f"/api/sweeps/{body['id']}/").json()
    assert [t["number"] for t in body["trials"]] == [0] and body["trials"][0]["run_state"] == "queued"
    assert body["summary"]["trials"] == 1


def test_a_viewer_may_read_but_not_create_or_stop(api, sweep, experiment, carol):
    client = as_user(api, carol)
    assert client.get(f"/api/sweeps/{sweep.pk}/").status_code == 200
    assert client.get(f"/api/sweeps/{sweep.pk}/importances/").json() == {}
    assert client.post("/api/sweeps/", {**BODY, "experiment": experiment.pk}, format="json").status_code == 403
    assert client.post(f"/api/sweeps/{sweep.pk}/stop/").status_code == 403
    assert client.post(f"/api/sweeps/{sweep.pk}/trials/0/experiment/").status_code == 403


def test_an_outsider_gets_404_for_the_sweep_and_the_experiment(api, sweep, experiment, charlie):
    client = as_user(api, charlie)
    listed = client.get("/api/sweeps/").json()
    assert (listed.get("results") if isinstance(listed, dict) else listed) == []
    for path in (f"/api/sweeps/{sweep.pk}/", f"/api/sweeps/{sweep.pk}/importances/"):
        assert client.get(path).status_code == 404
    assert client.post(f"/api/sweeps/{sweep.pk}/stop/").status_code == 404
    assert client.post("/api/sweeps/", {**BODY, "experiment": experiment.pk}, format="json").status_code == 404
    page = Client()
    page.force_login(charlie)
    assert page.get(f"/sweeps/{sweep.pk}/").status_code == 404
    assert page.get(f"/experiments/{experiment.pk}/sweeps/new/").status_code == 404


@pytest.mark.parametrize("change, field, words", [
    ({"parameters": []}, "parameters", "at least one setting"),
    ({"parameters": [{"name": "model.path", "kind": "choice", "choices": ["x"]}]}, "parameters[0].name",
     "not a setting a sweep can vary"),
    ({"parameters": [{"name": "optim.lr", "kind": "float", "low": 0.1, "high": 0.01}]}, "parameters[0].high",
     "must be above low"),
    ({"parameters": [{"name": "optim.lr", "kind": "float", "low": 0, "high": 0.01, "log": True}]},
     "parameters[0].low", "above 0"),
    ({"parameters": [{"name": "optim.lr", "kind": "float", "low": 1e-5, "high": 5}]}, "parameters[0].high",
     "at most 1"),
    ({"parameters": [{"name": "algorithm.group_size", "kind": "int", "low": 2, "high": 8, "step": 0}]},
     "parameters[0].step", "a whole number, 1 or more"),
    ({"parameters": [{"name": "algorithm.group_size", "kind": "float", "low": 2, "high": 8}]},
     "parameters[0].kind", "swept as 'int'"),
    ({"parameters": [{"name": "algorithm.kl_estimator", "kind": "choice", "choices": ["k9"]}]},
     "parameters[0].choices", "'k9' is not a choice"),
    ({"parameters": [LR_AND_GROUP[0], LR_AND_GROUP[0]]}, "parameters[1].name", "varied twice"),
    ({"sampler": "bayes"}, "sampler", "not a valid choice"),
    ({"max_trials": 0}, "max_trials", "greater than or equal to 1"),
    ({"max_trials": 2, "max_concurrent": 3}, "max_concurrent", "at most the number of trials"),
])  # fmt: skip
def test_bad_input_is_refused_naming_the_field(api, experiment, alice, change, field, words):
    answer = as_user(api, alice).post("/api/sweeps/", {**BODY, "experiment": experiment.pk, **change}, format="json")
    assert answer.status_code == 400, answer.json()
    message = answer.json()[field]
    assert words in (message if isinstance(message, str) else " ".join(message)), answer.json()
    assert not Sweep.objects.exists()


def test_a_range_end_the_spec_refuses_is_refused_before_any_trial(api, experiment, alice):
    # Within the field's own bounds, but the spec refuses a minimum above the maximum (32 by default).
    parameters = [{"name": "curriculum.min_group_size", "kind": "int", "low": 2, "high": 64}]
    answer = as_user(api, alice).post("/api/sweeps/", {**BODY, "experiment": experiment.pk, "parameters": parameters},
                                      format="json")  # fmt: skip
    assert answer.status_code == 400
    assert "curriculum.min_group_size = 64: the settings are refused" in answer.json()["parameters[0]"]
    assert "min_group_size must not exceed max_group_size" in answer.json()["parameters[0]"]
    assert not Sweep.objects.exists()


def test_stop_ends_the_sweep_and_cancels_its_queued_trial(api, sweep, alice):
    answer = as_user(api, alice).post(f"/api/sweeps/{sweep.pk}/stop/")
    assert answer.status_code == 200
    assert answer.json()["state"] == "stopped"
    trial = sweep.trials.get()
    assert trial.run.state == "cancelled" and trial.state == "failed"


def test_a_trial_becomes_an_experiment_with_its_values(api, sweep, alice, experiment):
    trial = sweep.trials.get()
    answer = as_user(api, alice).post(f"/api/sweeps/{sweep.pk}/trials/{trial.number}/experiment/")
    assert answer.status_code == 201, answer.json()
    made = Experiment.objects.get(pk=answer.json()["id"])
    assert made.team_id == experiment.team_id and made.dataset_id == experiment.dataset_id
    assert made.config["optim"]["lr"] == trial.values["optim.lr"]
    assert made.config["algorithm"]["group_size"] == trial.values["algorithm.group_size"]
    assert made.config["optim"]["total_steps"] == 3
    assert as_user(api, alice).post(f"/api/sweeps/{sweep.pk}/trials/99/experiment/").status_code == 404


def test_the_pages_show_the_form_the_trials_and_the_trial_on_its_run(sweep, experiment, alice):
    page = Client()
    page.force_login(alice)
    form = page.get(f"/experiments/{experiment.pk}/sweeps/new/").content.decode()
    assert 'name="p0-name"' in form and 'value="optim.lr"' in form and 'value="algorithm.group_size"' in form
    assert "New sweep" in page.get(f"/experiments/{experiment.pk}/").content.decode()
    shown = page.get(f"/sweeps/{sweep.pk}/").content.decode()
    trial = sweep.trials.get()
    assert f'data-trial="{trial.number}"' in shown and f"?ids={trial.run_id}" in shown
    assert 'id="sweep-plot"' in shown
    run_page = page.get(f"/runs/{trial.run_id}/").content.decode()
    assert "data-sweep-trial" in run_page and f"Trial {trial.number} of sweep" in run_page


def test_the_form_refuses_a_bad_range_beside_the_form(experiment, alice):
    page = Client()
    page.force_login(alice)
    answer = page.post(f"/experiments/{experiment.pk}/sweeps/new/", {"p0-name": "optim.lr", "p0-low": "abc",
                       "p0-high": "0.1", "max_trials": "3", "max_concurrent": "1"})  # fmt: skip
    assert answer.status_code == 200
    assert "parameters[0].low" in answer.content.decode() and "a number is needed" in answer.content.decode()
    assert not Sweep.objects.exists()
