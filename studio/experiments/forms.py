"""The experiment form: RunSpec sections rendered from the schema (studio.lib.schema_form) and read back."""

from __future__ import annotations

import json
import re
from typing import Any

from studio.bootstrap import calculator_transcripts_path
from studio.lib.schema_form import FormField, fields_for, read_fields
from trainers.data.procedural.catalog import TASKS
from trainers.rollout.engines.availability import vllm_build, vllm_unavailable_reason
from trainers.spec import RunSpec
from trainers.spec.data import ProceduralSpec

# RunSpec parts the experiment form does not show: they come from the dataset, the rubric,
# the model field, or are set per run by the studio.
EXPERIMENT_SECTIONS = ("model", "data", "reward", "algorithm", "rollout", "optim", "parallel", "curriculum", "checkpoint",
                       "eval", "validation", "warm_up", "teacher")  # fmt: skip
# Sections the spec may leave out (None: the feature is off), with the fields that turn one on: the
# form always shows their fields, and a section with none of these filled is left out when read back.
OPTIONAL_SECTIONS = {"validation": ("path", "holdout_fraction"), "warm_up": ("path",), "teacher": ("teachers",)}
HIDDEN = ("model.path", "data.path", "data.format", "data.split", "data.prompt_field", "data.messages_field",
          "data.answer_field", "data.extra_fields", "checkpoint.output_dir", "checkpoint.resume_from",
          "eval.checkpoint", "model.lora")  # fmt: skip


def _run_schema() -> dict[str, Any]:
    return RunSpec.model_json_schema()


def experiment_sections(config: dict[str, Any], errors: dict[str, str]) -> list[tuple[str, list[FormField]]]:
    schema = _run_schema()
    out = []
    for section in EXPERIMENT_SECTIONS:
        # An optional section is anyOf [its model, null]: the form shows the model's fields.
        node = next(o for o in schema["properties"][section].get("anyOf", [schema["properties"][section]])
                    if o.get("type") != "null")  # fmt: skip
        out.append((section, fields_for(schema, node, f"{section}.", config.get(section) or {}, errors, HIDDEN)))
    for _, fields in out:
        for f in fields:
            if f.name == "rollout.engine":
                describe_engines(f)
            elif f.name == "data.procedural":
                describe_procedural(f)
            elif f.name == "warm_up.path":
                suggest_transcripts(f)
    return out


def suggest_transcripts(f: FormField) -> None:
    """The cold start's file: the agent demo's calculator conversations, once the first start wrote them
    (an agent built from scratch calls no tool until it has seen some: trainers/run/tool_silence.py)."""
    path = calculator_transcripts_path()
    if path.is_file():
        f.suggestions = [(str(path), "the calculator demo's conversations: Hermes tool calls, then the answer")]
        f.help = f"{f.help} For an agent with the calculator: {path} (the agent demo's)."


def describe_procedural(f: FormField) -> None:
    """The generated-prompts field: its settings and the tasks (from the catalogue), an example, and
    a bare task name as short for {"task": name}."""
    schema = ProceduralSpec.model_json_schema()
    task = schema["properties"]["task"]
    f.help = (f"{f.help} A JSON object; settings: {', '.join(schema['properties'])}. task — {task['description']} "
              f'Example: {json.dumps({"task": TASKS.names()[0], "start_difficulty": 1})}; a bare task name '
              f'({TASKS.names()[0]}) is short for {{"task": "{TASKS.names()[0]}"}}.')  # fmt: skip
    f.shorthand = procedural_shorthand


def procedural_shorthand(text: str) -> dict[str, Any]:
    """A bare task name ("arithmetic") as {"task": "arithmetic"}; ValueError with the shape and the tasks."""
    name = text.strip()
    example = json.dumps({"task": TASKS.names()[0], "start_difficulty": 1})
    if re.fullmatch(r"[A-Za-z_][\w-]*", name) and name in TASKS:
        return {"task": name}
    what = f"unknown procedural task {name!r}" if re.fullmatch(r"[A-Za-z_][\w-]*", name) else "not a JSON object"
    raise ValueError(
        f"{what}. Expected a JSON object like {example}, or a task name; tasks: {', '.join(TASKS.names())}."
    )


def describe_engines(f: FormField) -> None:
    """Say on the engine field what this installation runs: the vLLM build, or why vLLM is off."""
    reason = vllm_unavailable_reason()
    if reason is None:
        f.help = f"{f.help} vLLM here: {vllm_build() or 'installed'}."
    else:
        f.note = f"vLLM is off on this installation; runs here use 'transformers'. {reason}"


def read_experiment_config(post) -> tuple[dict[str, Any], dict[str, str]]:
    fields = [f for _, section in experiment_sections({}, {}) for f in section]
    config, errors = read_fields(fields, post)
    for section, switches in OPTIONAL_SECTIONS.items():
        values = config.get(section) or {}
        if all(values.get(name) in (None, "") for name in switches):
            config.pop(section, None)
    return config, errors


def experiment_meta(base, post) -> dict[str, Any]:
    keys = ("team", "name", "description", "dataset", "rubric", "environment", "environment_version", "model_path",
            "preset")  # fmt: skip
    if post is not None:
        meta = {k: post.get(k, "") for k in keys}
        # An empty select or number means none (for the dataset: generated prompts; for the version, the
        # latest of the chosen environment).
        return {**meta, "dataset": meta["dataset"] or None, "environment": meta["environment"] or None,
                "environment_version": meta["environment_version"] or None}  # fmt: skip
    if base is None:
        return dict.fromkeys(keys, "")
    return {"team": base.team_id, "name": base.name if base.pk else "", "description": base.description,
            "dataset": base.dataset_id, "rubric": base.rubric_id, "environment": base.environment_id,
            "environment_version": base.environment_version, "model_path": base.model_path, "preset": base.preset}  # fmt: skip
