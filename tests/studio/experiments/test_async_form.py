"""Asynchronous rollouts on the experiment form (issue 28): `rollout.asynchronous` as fields of its own
(not a JSON box) that say what asynchrony trades, the off-policy correction as a dropdown of the
registered corrections, both saved from the form and refused beside their field; and the experiment's
page saying when its runs are not bit-reproducible."""

from __future__ import annotations

from studio.experiments import forms
from studio.experiments.layout import place_errors
from studio.experiments.models import Experiment
from tests.studio.base import StudioTestCase
from tests.studio.experiments.test_form_layout import field, group
from trainers.algorithms.catalog import OFF_POLICY_CORRECTIONS

ASYNC_FIELDS = ["rollout.asynchronous.mode", "rollout.asynchronous.max_staleness",
                "rollout.asynchronous.partial_rollouts", "rollout.asynchronous.segment_tokens",
                "rollout.asynchronous.over_provision"]  # fmt: skip


class AsynchronousFormTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.client.force_login(self.bob)

    def post(self, name: str = "async", **fields: str):
        body = {"team": self.team.pk, "name": name, "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "preset": "grpo", **fields}  # fmt: skip
        return self.client.post("/experiments/new/", body)

    def test_the_asynchronous_settings_are_fields_of_the_generation_group(self):
        response = self.client.get("/experiments/new/")
        names = [f.name for f in group(response, "rollout").fields]
        self.assertEqual([n for n in names if n.startswith("rollout.asynchronous")], ASYNC_FIELDS)
        self.assertNotIn("rollout.asynchronous", names)  # no JSON box for the section
        mode, staleness = (
            field(response, "rollout.asynchronous.mode"),
            field(response, "rollout.asynchronous.max_staleness"),
        )
        self.assertEqual((mode.widget, mode.choices, mode.value), ("select", ["sync", "async"], "sync"))
        self.assertEqual(
            (staleness.widget, staleness.kind, staleness.minimum, staleness.maximum), ("number", "integer", 0, 64)
        )
        self.assertEqual(field(response, "rollout.asynchronous.partial_rollouts").widget, "checkbox")
        self.assertEqual(mode.label, "asynchronous › mode")
        # The help says what asynchrony trades, once, where the section starts.
        self.assertIn("trades exact reproducibility for throughput", mode.help)
        self.assertIn("not bit-identical", mode.help)
        self.assertNotIn("trades exact reproducibility", staleness.help)
        page = response.content.decode()
        self.assertIn('<select id="rollout.asynchronous.mode" name="rollout.asynchronous.mode">', page)
        self.assertIn('name="rollout.asynchronous.max_staleness" value="1" step="1"', page)

    def test_the_correction_is_a_dropdown_of_the_registered_corrections(self):
        response = self.client.get("/experiments/new/")
        correction = field(response, "algorithm.correction")
        self.assertEqual((correction.widget, correction.choices), ("select", ["", *OFF_POLICY_CORRECTIONS]))
        self.assertEqual(correction.display_value, "")  # none by default
        page = response.content.decode()
        self.assertIn('<option value="decoupled"  title="Decoupled PPO (AReaL)', page)  # what each one does

    def test_the_form_saves_the_asynchronous_settings_and_the_correction(self):
        response = self.post(**{"rollout.asynchronous.mode": "async", "rollout.asynchronous.max_staleness": "2",
                                "rollout.asynchronous.partial_rollouts": "on", "rollout.asynchronous.segment_tokens": "8",
                                "rollout.asynchronous.over_provision": "1.5", "algorithm.correction": "decoupled"})  # fmt: skip
        saved = Experiment.objects.get(name="async")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        self.assertEqual(saved.config["rollout"]["asynchronous"], {"mode": "async", "max_staleness": 2,
                         "partial_rollouts": True, "segment_tokens": 8, "over_provision": 1.5})  # fmt: skip
        self.assertEqual(saved.config["algorithm"]["correction"], "decoupled")
        # Opened again, the fields show what was saved.
        edit = self.client.get(f"/experiments/{saved.pk}/edit/")
        self.assertEqual(field(edit, "rollout.asynchronous.max_staleness").value, 2)
        self.assertTrue(field(edit, "rollout.asynchronous.max_staleness").changed)
        self.assertEqual(field(edit, "algorithm.correction").display_value, "decoupled")

    def test_an_empty_correction_saves_none(self):
        self.assertEqual(self.post(**{"algorithm.correction": ""}).status_code, 302)
        self.assertIsNone(Experiment.objects.get(name="async").config["algorithm"].get("correction"))

    def test_a_value_out_of_bounds_is_refused_beside_its_field(self):
        response = self.post(**{"rollout.asynchronous.mode": "async", "rollout.asynchronous.max_staleness": "99"})
        self.assertEqual(response.status_code, 200)
        self.assertFalse(Experiment.objects.filter(name="async").exists())
        self.assertIn("64", field(response, "rollout.asynchronous.max_staleness").error)
        self.assertTrue(group(response, "rollout").has_error)
        self.assertEqual(response.context["placed"].top, [])  # beside the field, not at the top

    def test_the_trainers_cross_field_rule_is_refused_beside_the_field_it_names(self):
        # Over-provisioning needs partial rollouts (trainers.spec.run): said beside over_provision.
        response = self.post(**{"rollout.asynchronous.mode": "async", "rollout.asynchronous.over_provision": "2"})
        self.assertEqual(response.status_code, 200)
        error = field(response, "rollout.asynchronous.over_provision").error
        self.assertIn("partial_rollouts", error)
        self.assertEqual(response.context["placed"].top, [])

    def test_an_unknown_correction_is_refused_beside_the_dropdown(self):
        response = self.post(**{"algorithm.correction": "made_up"})
        self.assertEqual(response.status_code, 200)
        self.assertIn("unknown off-policy correction", field(response, "algorithm.correction").error)


class AsynchronousExperimentPageTest(StudioTestCase):
    def test_an_asynchronous_experiment_says_its_runs_are_not_bit_reproducible(self):
        self.client.force_login(self.bob)
        self.assertNotContains(self.client.get(f"/experiments/{self.experiment.pk}/"), "data-asynchronous-note")
        self.experiment.config = {**self.experiment.config, "rollout": {"asynchronous": {"mode": "async"}}}
        self.experiment.save()
        page = self.client.get(f"/experiments/{self.experiment.pk}/").content.decode()
        self.assertIn("data-asynchronous-note", page)
        self.assertIn("not bit-reproducible", page)


def test_a_message_naming_a_nested_setting_names_it_by_its_label():
    sections = forms.experiment_sections({}, {})
    placed = place_errors({"__all__": "rollout.asynchronous.segment_tokens must be small"}, sections)
    assert placed.beside == {"rollout.asynchronous.segment_tokens": "“asynchronous › segment tokens” must be small"}
