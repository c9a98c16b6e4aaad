"""The experiment form's layout: the preset first, the settings it sets in an open section,
the batch settings beside what a step costs, the rest in collapsed groups by RunSpec section;
every field marked where its value differs from what the preset (or the schema default) gives.

Layout only: which fields exist and how they are read and validated is studio.experiments.forms.
experiment_form.js moves the fields and updates the marks and the step cost as the user edits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Max

from studio.accounts import permissions as perms
from studio.bootstrap import demo_model_path
from studio.experiments.models import Experiment
from studio.lib.schema_form import FormField, display
from trainers.spec import PRESET_DESCRIPTIONS, PRESETS, preset_values, step_rollouts

DEFAULT_PRESET = "grpo"  # what a new experiment starts from (the first preset, the best known)
PRESET_FIELD = "algorithm.preset"  # mirrors the Preset select (a hidden input), so "Preset" shows once
# Open beside the step cost: what decides how much a step generates and trains on.
BATCH_FIELDS = ("optim.prompts_per_step", "algorithm.group_size", "rollout.max_new_tokens", "data.max_prompt_tokens",
                "optim.micro_batch_size", "optim.total_steps")  # fmt: skip
GROUP_TITLES = {"model": "Model", "data": "Data", "reward": "Reward checks", "algorithm": "Algorithm", "rollout": "Generation",
                "optim": "Optimisation", "curriculum": "Curriculum", "checkpoint": "Checkpoints", "eval": "Evaluation",
                "validation": "Validation"}  # fmt: skip
# The fields the step cost reads, by role (experiment_form.js reads the same names from the page).
COST_INPUTS = {"prompts": "optim.prompts_per_step", "group": "algorithm.group_size",
               "new_tokens": "rollout.max_new_tokens", "prompt_tokens": "data.max_prompt_tokens",
               "dynamic": "algorithm.dynamic_sampling", "max_rounds": "algorithm.dynamic_sampling_max_rounds",
               "passes": "algorithm.ppo_epochs", "budget": "curriculum.budget",
               "budget_total": "curriculum.rollouts_per_step", "min_group": "curriculum.min_group_size",
               "max_group": "curriculum.max_group_size"}  # fmt: skip
# Cost inputs that are not whole numbers: a checkbox, a choice, and a number that may be empty.
TEXT_COST_INPUTS = ("dynamic", "budget", "budget_total")
KNOWN_MODELS_SHOWN = 20


@dataclass
class FieldGroup:
    key: str  # "preset", "batch", or a RunSpec section
    title: str
    fields: list[FormField] = field(default_factory=list)
    collapsed: bool = True

    @property
    def changed(self) -> int:
        return sum(f.changed for f in self.fields)

    @property
    def has_error(self) -> bool:
        return any(f.error for f in self.fields)


@dataclass(frozen=True)
class StepCost:
    """Upper bounds of one optimiser step: completions sampled, tokens generated, tokens trained on.
    How many completions each prompt gets is the curriculum's rollout budget's rule (step_rollouts)."""

    prompts: int
    group: int
    new_tokens: int
    prompt_tokens: int
    rounds: int = 1  # generation rounds: dynamic sampling draws more prompts, up to its cap
    passes: int = 1  # ppo_epochs: passes over the trained tokens
    budget: str = "fixed"  # curriculum.budget
    budget_total: int | None = None  # curriculum.rollouts_per_step (knapsack)
    min_group: int = 2  # curriculum.min_group_size (knapsack)
    max_group: int = 32  # curriculum.max_group_size (knapsack's cap, brorl's group)

    @property
    def completions(self) -> int:
        return step_rollouts(self.budget, self.prompts, self.group, rollouts_per_step=self.budget_total,
                             max_group_size=self.max_group)  # fmt: skip

    @property
    def samples(self) -> str:
        """Samples per prompt as the page shows them: knapsack's range, else the one group size."""
        if self.budget == "knapsack":
            return f"{self.min_group:,}–{self.max_group:,}"
        return f"{self.max_group if self.budget == 'brorl' else self.group:,}"

    @property
    def generated(self) -> int:
        return self.rounds * self.completions * self.new_tokens

    @property
    def trained(self) -> int:
        """Prompt and completion tokens of the groups trained on (at most prompts_per_step of them)."""
        return self.completions * (self.prompt_tokens + self.new_tokens)

    @property
    def shown(self) -> dict[str, str]:
        """Each number as the page shows it (thousands separated, as experiment_form.js writes them)."""
        numbers = {"prompts": self.prompts, "completions": self.completions, "generated": self.generated,
                   "trained": self.trained, "rounds": self.rounds, "passes": self.passes}  # fmt: skip
        return {"group": self.samples, "budget": self.budget, **{key: f"{n:,}" for key, n in numbers.items()}}

    @classmethod
    def of(cls, fields: list[FormField]) -> StepCost | None:
        """The cost of the values in these fields; None while one of them is not a whole number (or the
        budget is not one the trainer knows)."""
        values = {f.name: f.value for f in fields}
        try:
            number = {role: int(values[name]) for role, name in COST_INPUTS.items() if role not in TEXT_COST_INPUTS}
            max_rounds, total = number.pop("max_rounds"), values[COST_INPUTS["budget_total"]]
            cost = cls(**number, rounds=max_rounds if values.get(COST_INPUTS["dynamic"]) else 1,
                       budget=str(values[COST_INPUTS["budget"]]), budget_total=int(total) if total else None)  # fmt: skip
            cost.completions  # noqa: B018 -- an unknown budget raises here, not while the page renders
        except (KeyError, TypeError, ValueError):
            return None
        return cost


def preset_settings(preset: str) -> dict[str, Any]:
    """Field name -> value, for the settings the preset sets ({} for none or an unknown name)."""
    if preset not in PRESETS:
        return {}
    return {f"algorithm.{key}": value for key, value in preset_values(preset).items() if key != "preset"}


def experiment_groups(sections: list[tuple[str, list[FormField]]], preset: str) -> list[FieldGroup]:
    """The form's groups in page order: set by the preset (open), batch (open), then one collapsed
    group per RunSpec section; every field compared with the preset's (or the default) value."""
    by_preset = preset_settings(preset)
    source = "preset" if by_preset else "default"
    groups = [FieldGroup("preset", "Set by the preset", collapsed=False), FieldGroup("batch", "Batch per step",
              collapsed=False)]  # fmt: skip
    groups += [FieldGroup(section, GROUP_TITLES[section]) for section, _ in sections]
    home = {g.key: g for g in groups}
    for f in in_page_order(sections):
        f.compare_with(by_preset.get(f.name, f.default), source)
        key = "preset" if f.name in by_preset else "batch" if f.name in BATCH_FIELDS else f.name.split(".")[0]
        home[key].fields.append(f)
    return groups


def in_page_order(sections: list[tuple[str, list[FormField]]]) -> list[FormField]:
    """The fields in the order the page shows them: the batch fields as BATCH_FIELDS lists them,
    the rest in schema order (the preset's hidden mirror left out)."""
    fields = [f for _, section in sections for f in section if f.name != PRESET_FIELD]
    return sorted(fields, key=lambda f: BATCH_FIELDS.index(f.name) if f.name in BATCH_FIELDS else len(BATCH_FIELDS))


def page_rules(sections: list[tuple[str, list[FormField]]]) -> dict[str, Any]:
    """What experiment_form.js needs from the server: each preset's description and the values it
    sets (as the inputs show them), the fields the step cost reads, the batch fields, and the
    fields in page order (where a field goes back to when a preset stops setting it)."""
    kinds = {f.name: f.kind for _, fields in sections for f in fields}
    presets = {
        name: {
            "description": PRESET_DESCRIPTIONS.get(name, ""),
            "values": {key: display(kinds[key], value) for key, value in preset_settings(name).items() if key in kinds},
        }
        for name in PRESET_DESCRIPTIONS
    }
    return {"presets": presets, "cost_inputs": COST_INPUTS, "batch_fields": BATCH_FIELDS, "preset_field": PRESET_FIELD,
            "field_order": [f.name for f in in_page_order(sections)]}  # fmt: skip


def known_models(user) -> list[str]:
    """Model paths to offer: the demo model (when built) and those of the experiments the user
    can see, most recently used first."""
    used = (
        perms.visible(Experiment.objects.all(), user)
        .values("model_path")
        .annotate(last=Max("created"))
        .order_by("-last")
        .values_list("model_path", flat=True)[:KNOWN_MODELS_SHOWN]
    )
    demo = demo_model_path()
    first = [str(demo)] if (demo / "config.json").exists() else []
    return first + [path for path in used if path and path not in first]
