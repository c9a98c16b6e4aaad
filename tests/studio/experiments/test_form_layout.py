"""The experiment form's layout (studio.experiments.layout): the preset first and once, the
settings it sets in an open section, the rest in collapsed groups with changes from the preset
marked, known models offered, and what a step costs beside the batch settings. The fields and
their names are the same as before: every knob is on the page, once."""

from __future__ import annotations

import json
import re
import shutil

from studio.bootstrap import TINY_MODEL_LABEL, calculator_transcripts_path, demo_model_path, real_model_path
from studio.experiments import forms
from studio.experiments.layout import BATCH_FIELDS, StepCost, preset_settings
from studio.experiments.models import Experiment
from tests.studio.base import StudioTestCase, model_folder
from trainers.models.pretrained import MARKER, SMOLLM2

FORM_FIELD = re.compile(r'<(?:input|select|textarea)\b[^>]*\bname="([^"]+)"')


def known_models(page: str) -> list[tuple[str, str | None]]:
    """(value, label or None) of each option of the page's model list."""
    datalist = page[page.index('<datalist id="known-models">') :].split("</datalist>")[0]
    options = re.findall(r"<option ([^>]*)>", datalist)
    return [(re.search(r'value="([^"]*)"', o).group(1), (re.search(r'label="([^"]*)"', o) or [None, None])[1])
            for o in options]  # fmt: skip


def install_real_model_marker():
    """The real model's folder as setup leaves it, as far as the studio looks (config + marker)."""
    folder = model_folder(real_model_path())
    (folder / MARKER).write_text(json.dumps({"package": SMOLLM2.requirement, "sha256": SMOLLM2.sha256}))
    return folder


def group(response, key: str):
    return next(g for g in response.context["groups"] if g.key == key)


def field(response, name: str):
    return next(f for g in response.context["groups"] for f in g.fields if f.name == name)


class ExperimentFormLayoutTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.client.force_login(self.bob)

    def test_a_new_form_leads_with_the_preset_named_once_and_shows_what_it_sets(self):
        response = self.client.get("/experiments/new/")
        page = response.content.decode()
        form = page[page.index("data-experiment-form") :]
        self.assertEqual(FORM_FIELD.findall(form)[:2], ["csrfmiddlewaretoken", "preset"])  # the first field
        self.assertEqual(len(re.findall(r"<label[^>]*>\s*preset\b", page, re.I)), 1)
        self.assertIn('<input type="hidden" name="algorithm.preset" value="grpo">', page)
        preset = group(response, "preset")
        self.assertFalse(preset.collapsed)
        self.assertEqual({f.name for f in preset.fields}, set(preset_settings("grpo")))
        self.assertEqual(field(response, "algorithm.kl_beta").value, 0.04)  # the preset's value, filled in
        self.assertFalse(any(f.changed for g in response.context["groups"] for f in g.fields))
        self.assertEqual(
            len(re.findall(r'<details class="panel form-group"', page)), len(forms.EXPERIMENT_SECTIONS)
        )  # one per RunSpec section

    def test_every_knob_is_on_the_page_once_under_its_old_name(self):
        page = self.client.get(f"/experiments/{self.experiment.pk}/edit/").content.decode()
        names = FORM_FIELD.findall(page[page.index("data-experiment-form") :])
        schema_fields = [f.name for _, fields in forms.experiment_sections({}, {}) for f in fields]
        meta = ["csrfmiddlewaretoken", "team", "name", "description", "dataset", "rubric", "environment",
                "environment_version", "model_path", "preset"]  # fmt: skip
        self.assertEqual(sorted(names), sorted(meta + schema_fields))

    def test_a_value_that_differs_from_the_preset_is_marked_and_says_what_the_preset_gives(self):
        self.experiment.preset = "grpo"
        self.experiment.config = {"algorithm": {"kl_beta": 0.1}, "optim": {"lr": 0.001, "total_steps": 100}}
        self.experiment.save()
        response = self.client.get(f"/experiments/{self.experiment.pk}/edit/")
        kl_beta, lr = field(response, "algorithm.kl_beta"), field(response, "optim.lr")
        self.assertEqual((kl_beta.changed, kl_beta.baseline, kl_beta.baseline_from), (True, "0.04", "preset"))
        self.assertEqual((lr.changed, lr.baseline), (True, "1e-06"))  # not set by grpo: the default it keeps
        self.assertFalse(field(response, "optim.total_steps").changed)  # 100 is the default
        self.assertEqual(group(response, "optim").changed, 1)
        self.assertContains(response, "changed from <span data-baseline-from>preset</span>: <code data-baseline>0.04")
        self.assertContains(response, '<span class="changed-count" data-changed-count >1 changed</span>', html=False)

    def test_without_a_preset_values_are_compared_with_the_defaults(self):
        response = self.client.get(f"/experiments/{self.experiment.pk}/edit/")  # preset "", total_steps 5
        steps = field(response, "optim.total_steps")
        self.assertEqual((steps.changed, steps.baseline, steps.baseline_from), (True, "100", "default"))
        self.assertEqual(group(response, "preset").fields, [])
        self.assertContains(response, "No preset chosen")

    def test_a_group_holding_a_field_error_is_open(self):
        body = {"team": self.team.pk, "name": "e2", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "preset": "grpo", "optim.lr": "fast"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        self.assertTrue(group(response, "optim").has_error)
        self.assertContains(response, '<details class="panel form-group" data-group="optim" open')
        self.assertEqual(Experiment.objects.count(), 1)

    def test_the_model_field_offers_the_real_model_then_the_tiny_one_then_the_models_of_experiments_one_can_see(self):
        Experiment.objects.create(team=self.other_team, name="theirs", dataset=self.dataset, rubric=self.rubric,
                                  model_path="/models/not-for-bob", created_by=self.charlie)  # fmt: skip
        demo = model_folder(demo_model_path())
        page = self.client.get("/experiments/new/").content.decode()
        self.assertEqual(known_models(page), [(str(demo), TINY_MODEL_LABEL), ("/models/tiny", None)])
        self.assertIn('list="known-models"', page)

        real = install_real_model_marker()  # and used by an experiment too: offered once, first
        Experiment.objects.create(team=self.team, name="real", dataset=self.dataset, rubric=self.rubric,
                                  model_path=str(real), created_by=self.alice)  # fmt: skip
        page = self.client.get("/experiments/new/").content.decode()
        self.assertEqual(known_models(page), [(str(real), SMOLLM2.describe()), (str(demo), TINY_MODEL_LABEL),
                                              ("/models/tiny", None)])  # fmt: skip
        self.assertIn("135 M parameters", SMOLLM2.describe())
        environments_page = self.client.get("/environments/new/").content.decode()
        self.assertEqual(known_models(environments_page)[0], (str(real), SMOLLM2.describe()))

    def test_the_cold_start_file_offers_the_agent_demos_calculator_conversations_once_written(self):
        self.assertNotIn('list="warm_up.path-suggestions"', self.client.get("/experiments/new/").content.decode())
        path = calculator_transcripts_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"messages": [{"role": "user", "content": "What is 2 + 2?"}]}\n')
        self.addCleanup(path.unlink)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn('<input type="text" id="warm_up.path" name="warm_up.path" value="" list="warm_up.path-suggestions"',
                      page)  # fmt: skip
        datalist = page[page.index('<datalist id="warm_up.path-suggestions">') :].split("</datalist>")[0]
        self.assertIn(f'<option value="{path}" label="the calculator demo&#x27;s conversations', datalist)
        self.assertIn(f"For an agent with the calculator: {path}", field(self.client.get("/experiments/new/"),
                                                                           "warm_up.path").help)  # fmt: skip

    def test_a_real_model_folder_without_the_pinned_conversion_is_not_offered(self):
        folder = install_real_model_marker()
        (folder / MARKER).write_text(json.dumps({"sha256": "0" * 64}))  # an older conversion
        page = self.client.get("/experiments/new/").content.decode()
        self.assertEqual(known_models(page), [("/models/tiny", None)])
        shutil.rmtree(folder)
        folder.mkdir()  # an interrupted one: no marker at all
        self.assertEqual(known_models(self.client.get("/experiments/new/").content.decode()), [("/models/tiny", None)])

    def test_the_step_cost_is_shown_beside_the_batch_settings(self):
        response = self.client.get("/experiments/new/")
        self.assertEqual({f.name for f in group(response, "batch").fields}, set(BATCH_FIELDS))
        cost = response.context["step_cost"]
        self.assertEqual((cost.completions, cost.generated, cost.trained), (64, 64 * 64, 64 * (512 + 64)))
        self.assertContains(response, '<b data-cost="generated">4,096</b>')
        self.assertContains(response, '<b data-cost="trained">36,864</b>')

    def test_the_step_cost_counts_dynamic_sampling_rounds_and_optimisation_passes(self):
        self.experiment.preset = "dapo"
        self.experiment.config = {"algorithm": {"dynamic_sampling": True, "dynamic_sampling_max_rounds": 3,
                                                "ppo_epochs": 2, "group_size": 4}}  # fmt: skip
        self.experiment.save()
        cost = self.client.get(f"/experiments/{self.experiment.pk}/edit/").context["step_cost"]
        self.assertEqual(cost, StepCost(prompts=8, group=4, new_tokens=64, prompt_tokens=512, rounds=3, passes=2))
        self.assertEqual((cost.generated, cost.trained), (3 * 32 * 64, 32 * (512 + 64)))

    def edit_with(self, curriculum: dict):
        self.experiment.config = {"curriculum": curriculum}
        self.experiment.save()
        return self.client.get(f"/experiments/{self.experiment.pk}/edit/")

    def test_a_knapsack_budget_costs_its_rollouts_per_step_whatever_the_group_size(self):
        response = self.edit_with({"budget": "knapsack", "rollouts_per_step": 48, "max_group_size": 16})
        cost = response.context["step_cost"]
        self.assertEqual(cost, StepCost(prompts=8, group=8, new_tokens=64, prompt_tokens=512, budget="knapsack",
                                        budget_total=48, min_group=2, max_group=16))  # fmt: skip
        self.assertEqual((cost.completions, cost.generated, cost.trained), (48, 48 * 64, 48 * (512 + 64)))
        self.assertContains(response, '<b data-cost="group">2–16</b> samples')
        self.assertContains(response, '<b data-cost="completions">48</b> completions<span data-cost-part="budget" >')
        # Without a total the knapsack shares what fixed group sizes would cost.
        self.assertEqual(self.edit_with({"budget": "knapsack"}).context["step_cost"].completions, 8 * 8)

    def test_a_brorl_budget_samples_max_group_size_per_prompt(self):
        response = self.edit_with({"budget": "brorl", "max_group_size": 16})
        cost = response.context["step_cost"]
        self.assertEqual((cost.completions, cost.shown["group"], cost.generated), (8 * 16, "16", 8 * 16 * 64))
        self.assertContains(response, '<b data-cost="completions">128</b>')

    def test_the_fixed_budget_hides_the_budget_note(self):
        response = self.client.get("/experiments/new/")
        self.assertEqual(response.context["step_cost"].completions, 8 * 8)
        self.assertContains(response, '<span data-cost-part="budget" hidden>')

    def test_the_curriculum_settings_are_on_the_form_and_saved_from_it(self):
        budget = field(self.client.get("/experiments/new/"), "curriculum.budget")
        self.assertEqual(budget.choices, ["fixed", "knapsack", "brorl"])
        body = {"team": self.team.pk, "name": "knap", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "preset": "grpo", "curriculum.budget": "knapsack",
                "curriculum.rollouts_per_step": "40", "curriculum.max_group_size": "8"}  # fmt: skip
        response = self.client.post("/experiments/new/", body)
        saved = Experiment.objects.get(name="knap")
        self.assertRedirects(response, f"/experiments/{saved.pk}/", fetch_redirect_response=False)
        curriculum = saved.config["curriculum"]
        self.assertEqual((curriculum["budget"], curriculum["rollouts_per_step"], curriculum["max_group_size"]),
                         ("knapsack", 40, 8))  # fmt: skip
        # A total the group sizes cannot hold is refused beside its reason, as the trainer says it.
        refused = self.client.post(
            "/experiments/new/", {**body, "name": "too big", "curriculum.rollouts_per_step": "999"}
        )
        self.assertEqual(refused.status_code, 200)
        self.assertIn("knapsack budget of 999 rollouts per step", str(refused.context["errors"]))


class ValidationSectionTest(StudioTestCase):
    """The Validation group (RunSpec.validation, optional): shown like any section, saved only when
    a held-out source is given, and refused beside its field when the settings cannot work."""

    def setUp(self) -> None:
        super().setUp()
        self.client.force_login(self.bob)

    def post(self, **fields):
        body = {"team": self.team.pk, "name": "with validation", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "preset": "grpo", "validation.every_n_steps": "5",
                "validation.samples_per_prompt": "4", "validation.at_start": "on", **fields}  # fmt: skip
        return self.client.post("/experiments/new/", body)

    def test_the_form_has_a_validation_group_with_its_fields(self):
        response = self.client.get("/experiments/new/")
        validation = group(response, "validation")
        self.assertEqual(validation.title, "Validation")
        self.assertIn("validation.holdout_fraction", {f.name for f in validation.fields})

    def test_without_a_held_out_source_no_validation_is_saved(self):
        self.assertEqual(self.post().status_code, 302)
        self.assertNotIn("validation", Experiment.objects.get(name="with validation").config)

    def test_a_holdout_fraction_saves_the_section(self):
        self.assertEqual(self.post(**{"validation.holdout_fraction": "0.2"}).status_code, 302)
        saved = Experiment.objects.get(name="with validation").config["validation"]
        self.assertEqual((saved["holdout_fraction"], saved["every_n_steps"], saved["at_start"]), (0.2, 5, True))

    def test_both_sources_are_refused_beside_the_field(self):
        response = self.post(**{"validation.holdout_fraction": "0.2", "validation.path": "held_out.jsonl"})
        self.assertEqual(response.status_code, 200)
        self.assertIn("not both", field(response, "validation.holdout_fraction").error)
        self.assertTrue(group(response, "validation").has_error)


class ParallelSectionTest(StudioTestCase):
    """The run's processes (one per GPU), nodes and sharding: a collapsed section after Optimisation whose
    summary says what they come to, and the step cost says how the prompts are split over the processes."""

    def setUp(self) -> None:
        super().setUp()
        self.client.force_login(self.bob)

    def test_a_new_form_shows_the_parallel_section_collapsed_after_optimisation_saying_one_process(self):
        response = self.client.get("/experiments/new/")
        keys = [g.key for g in response.context["groups"]]
        self.assertEqual(keys[keys.index("optim") + 1], "parallel")
        parallel = group(response, "parallel")
        self.assertTrue(parallel.collapsed)
        self.assertEqual(
            {f.name for f in parallel.fields},
            {
                f"parallel.{name}"
                for name in (
                    "procs_per_node",
                    "nodes",
                    "sharding",
                    "mixed_precision",
                    "cpu_offload",
                    "activation_checkpointing",
                )
            },
        )
        self.assertEqual(parallel.summary, "1 process")
        page = response.content.decode()
        self.assertIn('<span class="muted" data-group-summary >1 process</span>', page)
        self.assertIn('<span data-cost-part="processes" hidden>', page)  # one process: nothing to split

    def test_several_processes_are_summarised_and_split_the_step(self):
        self.experiment.config = {"parallel": {"procs_per_node": 4, "sharding": "replicate"}}
        self.experiment.save()
        response = self.client.get(f"/experiments/{self.experiment.pk}/edit/")
        self.assertEqual(group(response, "parallel").summary, "4 processes on one machine, replicate sharding")
        self.assertEqual(group(response, "parallel").changed, 2)
        cost = response.context["step_cost"]
        self.assertEqual((cost.processes, cost.prompts_per_process), (4, 2))  # 8 prompts
        self.assertContains(response, '<b data-cost="prompts_per_process">2</b>')
        self.assertNotContains(response, '<span data-cost-part="processes" hidden>')

    def test_saving_the_form_keeps_the_processes(self):
        body = {"team": self.team.pk, "name": "e2", "dataset": self.dataset.pk, "rubric": self.rubric.pk,
                "model_path": "/m", "preset": "grpo", "parallel.procs_per_node": "2", "parallel.nodes": "1",
                "parallel.sharding": "full", "parallel.mixed_precision": "off"}  # fmt: skip
        self.client.post("/experiments/new/", body)
        self.assertEqual(Experiment.objects.get(name="e2").spec_config()["parallel"]["procs_per_node"], 2)
