"""The experiment form's layout: the preset first, the settings it sets in an open section,
the batch settings beside what a step costs, the rest in collapsed groups by RunSpec section;
every field marked where its value differs from what the preset (or the schema default) gives.

Layout only: which fields exist and how they are read and validated is studio.experiments.forms.
experiment_form.js moves the fields and updates the marks and the step cost as the user edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db.models import Max

from studio.accounts import permissions as perms
from studio.bootstrap import TINY_MODEL_LABEL, demo_model_path, real_model_installed, real_model_path
from studio.experiments.models import Experiment
from studio.lib.schema_form import FormField, display
from trainers.models.pretrained import SMOLLM2
from trainers.spec import (
    PRESET_DESCRIPTIONS,
    PRESETS,
    EnvironmentSpec,
    TokenBounds,
    preset_values,
    step_rollouts,
    token_bounds,
)

DEFAULT_PRESET = "grpo"  # what a new experiment starts from (the first preset, the best known)
PRESET_FIELD = "algorithm.preset"  # mirrors the Preset select (a hidden input), so "Preset" shows once
# Open beside the step cost: what decides how much a step generates and trains on.
BATCH_FIELDS = ("optim.prompts_per_step", "algorithm.group_size", "rollout.max_new_tokens", "data.max_prompt_tokens",
                "optim.micro_batch_size", "optim.total_steps")  # fmt: skip
GROUP_TITLES = {"model": "Model", "data": "Data", "reward": "Reward checks", "algorithm": "Algorithm", "rollout": "Generation",
                "optim": "Optimisation", "parallel": "Processes (GPUs) and sharding", "curriculum": "Curriculum",
                "checkpoint": "Checkpoints", "eval": "Evaluation", "validation": "Validation",
                "warm_up": "Cold start (supervised, before RL)", "teacher": "Teachers (on-policy distillation)"}  # fmt: skip
# The fields the step cost reads, by role (experiment_form.js reads the same names from the page).
COST_INPUTS = {"prompts": "optim.prompts_per_step", "group": "algorithm.group_size",
               "new_tokens": "rollout.max_new_tokens", "prompt_tokens": "data.max_prompt_tokens",
               "dynamic": "algorithm.dynamic_sampling", "max_rounds": "algorithm.dynamic_sampling_max_rounds",
               "passes": "algorithm.ppo_epochs", "budget": "curriculum.budget",
               "budget_total": "curriculum.rollouts_per_step", "min_group": "curriculum.min_group_size",
               "max_group": "curriculum.max_group_size", "procs": "parallel.procs_per_node", "nodes": "parallel.nodes"}  # fmt: skip
# The parallel group's summary line reads these (experiment_form.js too, from the page's rules).
PARALLEL_INPUTS = {"procs": "parallel.procs_per_node", "nodes": "parallel.nodes", "sharding": "parallel.sharding"}
# Cost inputs that are not whole numbers: a checkbox, a choice, and a number that may be empty.
TEXT_COST_INPUTS = ("dynamic", "budget", "budget_total")
# An environment's episode limits the step cost reads (trainers.spec.token_bounds), from its config.
EPISODE_LIMITS = ("max_turns", "max_turn_tokens", "max_episode_tokens")
KNOWN_MODELS_SHOWN = 20


@dataclass
class FieldGroup:
    key: str  # "preset", "batch", or a RunSpec section
    title: str
    fields: list[FormField] = field(default_factory=list)
    collapsed: bool = True
    summary: str = ""  # what a collapsed group's values come to, beside its title ("" for none)

    @property
    def changed(self) -> int:
        return sum(f.changed for f in self.fields)

    @property
    def has_error(self) -> bool:
        return any(f.error for f in self.fields)


@dataclass(frozen=True)
class StepCost:
    """Upper bounds of one optimiser step: completions sampled, tokens generated, tokens trained on.
    How many completions each prompt gets is the curriculum's rollout budget's rule (step_rollouts);
    how long each is, the token limits' (trainers.spec.token_bounds: with an environment, turns of
    at most min(max_new_tokens, max_turn_tokens) tokens within the episode's budget)."""

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
    procs: int = 1  # parallel.procs_per_node
    nodes: int = 1  # parallel.nodes
    # The chosen environment's episode limits (None: no environment, one turn per prompt).
    max_turns: int | None = None
    max_turn_tokens: int | None = None
    max_episode_tokens: int | None = None

    @property
    def tokens(self) -> TokenBounds:
        return token_bounds(self.new_tokens, self.max_turns, self.max_turn_tokens, self.max_episode_tokens)

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
    def processes(self) -> int:
        return self.procs * self.nodes

    @property
    def prompts_per_process(self) -> int:
        """The most prompts one process generates for: each takes every processes-th prompt of the step."""
        return -(-self.prompts // self.processes)

    @property
    def generated(self) -> int:
        return self.rounds * self.completions * self.tokens.sampled

    @property
    def trained(self) -> int:
        """Prompt and completion tokens of the groups trained on (at most prompts_per_step of them); an
        episode's completion holds its observations too."""
        return self.completions * (self.prompt_tokens + self.tokens.after_prompt)

    @property
    def shown(self) -> dict[str, str]:
        """Each number as the page shows it (thousands separated, as experiment_form.js writes them)."""
        numbers = {"prompts": self.prompts, "completions": self.completions, "generated": self.generated,
                   "trained": self.trained, "rounds": self.rounds, "passes": self.passes, "processes": self.processes,
                   "prompts_per_process": self.prompts_per_process}  # fmt: skip
        episode = {"turns": self.max_turns, "turn_tokens": self.tokens.turn, "episode_tokens": self.max_episode_tokens}
        if self.max_turns is None:  # no environment: the page hides the episode's part
            episode = dict.fromkeys(episode, "")
        return {"group": self.samples, "budget": self.budget, **{key: f"{n:,}" for key, n in numbers.items()},
                **{key: n if n == "" else f"{n:,}" for key, n in episode.items()}}  # fmt: skip

    @classmethod
    def of(cls, fields: list[FormField], environment: dict[str, Any] | None = None) -> StepCost | None:
        """The cost of the values in these fields, for runs in `environment` (a config: its episode limits;
        None: one turn per prompt); None while one of them is not a whole number (or the budget is not
        one the trainer knows)."""
        values = {f.name: f.value for f in fields}
        try:
            number = {role: int(values[name]) for role, name in COST_INPUTS.items() if role not in TEXT_COST_INPUTS}
            max_rounds, total = number.pop("max_rounds"), values[COST_INPUTS["budget_total"]]
            limits = episode_limits(environment)
            cost = cls(**number, rounds=max_rounds if values.get(COST_INPUTS["dynamic"]) else 1,
                       budget=str(values[COST_INPUTS["budget"]]), budget_total=int(total) if total else None,
                       **(limits or {}))  # fmt: skip
            cost.completions  # noqa: B018 -- an unknown budget raises here, not while the page renders
        except (KeyError, TypeError, ValueError):
            return None
        return cost


def episode_limits(config: dict[str, Any] | None) -> dict[str, int] | None:
    """{max_turns, max_turn_tokens, max_episode_tokens} of an environment config, the schema's default
    where it has none (None for no environment)."""
    if config is None:
        return None
    out = {}
    for name in EPISODE_LIMITS:
        try:
            out[name] = int(config.get(name) or EnvironmentSpec.model_fields[name].default)
        except (TypeError, ValueError):  # a stored config the schema would refuse: its default
            out[name] = EnvironmentSpec.model_fields[name].default
    return out


def environment_limits(environments) -> dict[str, dict[str, Any]]:
    """{environment id: {"latest": n, "versions": {n: episode limits}}} for experiment_form.js's step cost:
    the limits of every version, so the cost follows the environment and version chosen (one query)."""
    from studio.environments.models import EnvironmentVersion

    out: dict[str, dict[str, Any]] = {
        str(e.pk): {"latest": e.version, "versions": {str(e.version): episode_limits(e.config)}} for e in environments
    }
    rows = EnvironmentVersion.objects.filter(environment__in=[int(pk) for pk in out]).values_list(
        "environment_id", "number", "config"
    )
    for pk, number, config in rows:
        out[str(pk)]["versions"].setdefault(str(number), episode_limits(config))
    return out


def parallel_summary(procs: Any, nodes: Any, sharding: Any) -> str:
    """The parallel group's values in a phrase: "1 process", "2 processes on one machine, full sharding",
    "8 processes: 4 per node × 2 nodes (Ray), hybrid sharding"; "" while a count is not a whole number.
    experiment_form.js's parallelSummary says the same."""
    try:
        procs, nodes = int(procs), int(nodes)
    except (TypeError, ValueError):
        return ""
    total = procs * nodes
    if total == 1:
        return "1 process"
    where = "on one machine" if nodes == 1 else f": {procs} per node × {nodes} nodes (Ray)"
    return f"{total} processes{' ' if nodes == 1 else ''}{where}, {sharding} sharding"


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
    if "parallel" in home:
        values = {f.name: f.value for _, fields in sections for f in fields}
        home["parallel"].summary = parallel_summary(*(values.get(name) for name in PARALLEL_INPUTS.values()))
    return groups


def in_page_order(sections: list[tuple[str, list[FormField]]]) -> list[FormField]:
    """The fields in the order the page shows them: the batch fields as BATCH_FIELDS lists them,
    the rest in schema order (the preset's hidden mirror left out)."""
    fields = [f for _, section in sections for f in section if f.name != PRESET_FIELD]
    return sorted(fields, key=lambda f: BATCH_FIELDS.index(f.name) if f.name in BATCH_FIELDS else len(BATCH_FIELDS))


def page_rules(sections: list[tuple[str, list[FormField]]], environments=()) -> dict[str, Any]:
    """What experiment_form.js needs from the server: each preset's description and the values it
    sets (as the inputs show them), the fields the step cost reads, the batch fields, the
    fields in page order (where a field goes back to when a preset stops setting it), and the
    episode limits of each environment the form offers."""
    kinds = {f.name: f.kind for _, fields in sections for f in fields}
    presets = {
        name: {
            "description": PRESET_DESCRIPTIONS.get(name, ""),
            "values": {key: display(kinds[key], value) for key, value in preset_settings(name).items() if key in kinds},
        }
        for name in PRESET_DESCRIPTIONS
    }
    return {"presets": presets, "cost_inputs": COST_INPUTS, "batch_fields": BATCH_FIELDS, "preset_field": PRESET_FIELD,
            "field_order": [f.name for f in in_page_order(sections)], "parallel_inputs": PARALLEL_INPUTS,
            "environments": environment_limits(environments)}  # fmt: skip


# ---------------------------------------------------------------- errors beside their fields

# The form's own inputs above the settings, by name, as their labels say them.
META_LABELS = {"name": "Name", "team": "Team", "description": "Description", "dataset": "Dataset",
               "rubric": "Rubric", "environment": "Environment", "environment_version": "Environment version",
               "model_path": "Model", "preset": "Preset"}  # fmt: skip
# Settings the form does not show, and the input above that sets them: the model field, the dataset
# (its file and mapping), the rubric, the environment, the preset select.
META_HOMES = {"model.path": "model_path", "data.path": "dataset", "data.format": "dataset", "data.split": "dataset",
              "data.prompt_field": "dataset", "data.messages_field": "dataset", "data.answer_field": "dataset",
              "data.extra_fields": "dataset", "rubric": "rubric", "environment": "environment",
              "algorithm.preset": "preset"}  # fmt: skip
# Keys that belong to no field: the whole config, a cross-section rule.
GENERAL_KEYS = ("__all__", "non_field_errors", "config")
# A setting's dotted path in a message: two parts ("optim.lr") or three ("rollout.asynchronous.mode").
DOTTED = re.compile(r"\b[a-z_]+(?:\.[a-z_]+)+\b")


@dataclass
class PlacedErrors:
    """The experiment form's errors where the page shows them: beside a setting (`beside`, by input name),
    beside one of the inputs above the settings (`meta`), or at the top for what has no field (`top`:
    (label or "", message) pairs). Messages name other settings by their labels, not their dotted paths."""

    beside: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    top: list[tuple[str, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.beside) + len(self.meta) + len(self.top)


def place_errors(errors: dict[str, str], sections: list[tuple[str, list[FormField]]]) -> PlacedErrors:
    """Each error beside the field it concerns (`PlacedErrors`). A key is a setting's input name
    ("optim.lr"), a part of one ("data.procedural.task": beside data.procedural, the part named), a
    setting the form sets from an input above (model.path: the Model field; data.path: the Dataset),
    one of those inputs (dataset, model_path), or none (__all__, a section): then a message that opens
    with a setting's name ("algorithm.overlong_buffer must be smaller than ...") goes beside it, the rest
    to the top."""
    fields = {f.name: f for _, section in sections for f in section}
    labels = {name: f.label for name, f in fields.items()}
    placed = PlacedErrors()

    def add(target: dict[str, str], key: str, message: str) -> None:
        target[key] = f"{target[key]} {message}" if key in target else message

    for raw_key, raw_message in errors.items():
        key = raw_key.removeprefix("config.")
        message = worded(raw_message, labels)
        home = _meta_home(key)
        if key in META_LABELS or home:
            add(placed.meta, home or key, message)
        elif key in fields:
            add(placed.beside, key, message)
        elif owner := next((name for name in fields if key.startswith(f"{name}.")), None):
            add(placed.beside, owner, f"{key.removeprefix(owner + '.')}: {message}")
        elif (opening := DOTTED.match(raw_message)) and (named := _named(opening.group(0), fields)):
            add(placed.beside, named, message)
        else:
            placed.top.append((_general_label(key), message))
    return placed


def labelled_errors(errors: dict[str, str], sections: list[tuple[str, list[FormField]]]) -> list[tuple[str, str]]:
    """The settings' errors for a page away from the form (the experiment's own page): (what the form calls
    the field, "Generation › max new tokens" or "Model"; the message with settings named by their labels)."""
    fields = {f.name: f for _, section in sections for f in section}
    labels = {name: f.label for name, f in fields.items()}
    out = []
    for raw_key, raw_message in errors.items():
        key = raw_key.removeprefix("config.")
        home = _meta_home(key) or (key if key in META_LABELS else None)
        named = _named(key, fields) if key in fields or "." in key else None
        if home:
            label = META_LABELS[home]
        elif named:
            section = named.partition(".")[0]
            rest = key.removeprefix(named).lstrip(".").replace("_", " ")
            label = f"{GROUP_TITLES.get(section, section)} › {fields[named].label}" + (f" › {rest}" if rest else "")
        else:
            label = _general_label(key)
        out.append((label, worded(raw_message, labels)))
    return out


def _meta_home(key: str) -> str | None:
    """The input above the settings that an error about `key` belongs beside, or None."""
    for prefix, home in META_HOMES.items():
        if key == prefix or key.startswith(f"{prefix}."):
            return home
    return None


def _general_label(key: str) -> str:
    """What the top of the form calls an error's key: a section's title, a setting's words, or nothing."""
    if key in GENERAL_KEYS or not key:
        return ""
    section, _, rest = key.partition(".")
    title = GROUP_TITLES.get(section)
    if title is None:
        return key.replace("_", " ")
    return f"{title} › {rest.replace('_', ' ').replace('.', ' › ')}" if rest else title


def worded(message: str, labels: dict[str, str]) -> str:
    """`message` with each setting named by its dotted path ("rollout.max_new_tokens") named by its label
    ("max new tokens") instead; other text as it is."""

    def label(m: re.Match[str]) -> str:
        path = m.group(0)
        named = _named(path, labels)
        return f"“{labels[named]}”{path.removeprefix(named)}" if named else path

    return DOTTED.sub(label, message)


def _named(path: str, names: dict[str, Any]) -> str | None:
    """The longest leading part of a dotted `path` that is one of `names` ("data.procedural" of
    "data.procedural.task"), or None."""
    parts = path.split(".")
    return next((".".join(parts[:n]) for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in names), None)


class KnownModel(NamedTuple):
    path: str
    label: str = ""  # what the model list shows beside the path ("" for a path experiments used)


def known_models(user) -> list[KnownModel]:
    """Models to offer: the real demo model (when setup installed it) with its size, the tiny demo
    model (when built), then those of the experiments the user can see, most recently used first."""
    used = (
        perms.visible(Experiment.objects.all(), user)
        .values("model_path")
        .annotate(last=Max("created"))
        .order_by("-last")
        .values_list("model_path", flat=True)[:KNOWN_MODELS_SHOWN]
    )
    first = []
    if real_model_installed():
        first.append(KnownModel(str(real_model_path()), SMOLLM2.describe()))
    if (demo_model_path() / "config.json").exists():
        first.append(KnownModel(str(demo_model_path()), TINY_MODEL_LABEL))
    shown = {model.path for model in first}
    return first + [KnownModel(path) for path in used if path and path not in shown]
