"""An evaluation suite: tasks (prompts + rubric + k + sampling) scored on a list of models (base models and
checkpoints), every pair through the same engine and seed. Each (model, task) pair is one evaluation run's
settings (`SuiteSpec.cell_spec`), so a suite's cell is exactly what a single evaluation run does."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from trainers.access import MODEL, marks
from trainers.spec.base import Section, located
from trainers.spec.data import DataSpec
from trainers.spec.model import ModelSpec
from trainers.spec.rollout import EnvironmentSpec, RolloutSpec
from trainers.spec.rubric import RubricSpec
from trainers.spec.run import RunSpec

# A sample passes at reward >= this when neither the task nor its rubric sets a threshold: full marks on the usual
# 0..1 scale, so pass@k means "solved" (as validation counts it).
DEFAULT_PASS_THRESHOLD = 1.0
# Task names go into metric keys (suite/<task>/pass@1) and model labels into table headers.
_TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class SuiteTaskSpec(Section):
    """One task of a suite: where its prompts come from, how a completion is scored, how many samples each
    prompt gets and how they are sampled."""

    name: str = Field(..., description="Short name (letters, digits, _ . -); used in metric keys suite/<name>/...")
    data: DataSpec = Field(..., description="The task's prompts: a dataset file or a procedural task.")
    environment: EnvironmentSpec | None = Field(None, description="Multi-turn environment; none: one turn.")
    rubric: RubricSpec
    samples_per_prompt: int = Field(4, ge=1, le=1024, description="k: samples per prompt (pass@1 ... pass@k).")
    num_prompts: int | None = Field(None, ge=1, le=100_000, description="Evaluate the first N prompts; empty: all.")
    pass_threshold: float | None = Field(
        None,
        description="A sample passes at reward >= this; empty: the rubric's pass_threshold, else full marks "
        f"({DEFAULT_PASS_THRESHOLD}).",
    )
    temperature: float | None = Field(None, ge=0, le=5, description="Sampling temperature; empty: the suite's.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling; empty: the suite's.")
    max_new_tokens: int | None = Field(None, ge=1, le=131072, description="Tokens per completion; empty: the suite's.")

    @field_validator("name")
    @classmethod
    def _short_name(cls, v: str) -> str:
        if not _TASK_NAME.fullmatch(v):
            raise ValueError("must be 1-64 letters, digits, _ . or - (it goes into metric keys suite/<name>/...)")
        return v


class SuiteModelSpec(Section):
    """One model a suite scores: a base model (model.path), or a checkpoint folder on top of the model settings
    of the run that wrote it (its LoRA, dtype)."""

    label: str = Field(..., min_length=1, max_length=120, description="Name in the result table.")
    model: ModelSpec
    checkpoint: str | None = Field(
        None, description="Checkpoint folder; empty: the base model itself.", json_schema_extra=marks(MODEL)
    )
    step: int | None = Field(None, ge=0, description="The training step the checkpoint was saved at, if known.")


class SuiteSpec(Section):
    """Every task scored on every model, with one engine kind and one seed."""

    name: str = Field("suite", min_length=1, max_length=200, description="Human-readable suite name.")
    tasks: list[SuiteTaskSpec] = Field(..., min_length=1, max_length=64, description="The tasks, in table order.")
    models: list[SuiteModelSpec] = Field(..., min_length=1, max_length=64, description="The models, in table order.")
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="Engine and default sampling settings, the same for every model."
    )
    seed: int = Field(0, ge=0, description="Every (model, task) samples from this seed: the same draws for each.")
    bootstrap_resamples: int = Field(
        1000, ge=10, le=100_000, description="Bootstrap resamples of the prompts for each interval."
    )
    confidence: float = Field(0.95, gt=0, lt=1, description="Coverage of the bootstrap intervals.")

    @field_validator("tasks")
    @classmethod
    def _unique_tasks(cls, v: list[SuiteTaskSpec]) -> list[SuiteTaskSpec]:
        _refuse_repeats("task names", [t.name for t in v])
        return v

    @field_validator("models")
    @classmethod
    def _unique_labels(cls, v: list[SuiteModelSpec]) -> list[SuiteModelSpec]:
        _refuse_repeats("model labels", [m.label for m in v])
        return v

    @model_validator(mode="after")
    def _cells_are_runs(self) -> SuiteSpec:
        """Each task must make a valid evaluation run (a procedural task with its environment, a rubric's
        formula...): refused at tasks.<i>... with the run's own message. One model is enough to check a task."""
        for i, task in enumerate(self.tasks):
            try:
                RunSpec.model_validate(self.cell_config(self.models[0], task))
            except ValidationError as exc:
                raise located(exc, "tasks", str(i)) from None
        return self

    def cell_config(self, model: SuiteModelSpec, task: SuiteTaskSpec) -> dict[str, Any]:
        """The evaluation run of `model` on `task`, as a RunSpec config."""
        rollout = self.rollout.model_dump()
        for key in ("temperature", "top_p", "max_new_tokens"):
            if getattr(task, key) is not None:
                rollout[key] = getattr(task, key)
        rubric = task.rubric.model_dump()
        # Always set, so the pair's run says how its samples pass: run alone, it reports the same pass@k.
        for threshold in (task.pass_threshold, task.rubric.pass_threshold, DEFAULT_PASS_THRESHOLD):
            if threshold is not None:
                rubric["pass_threshold"] = threshold
                break
        return {
            "name": f"{self.name}: {model.label} on {task.name}",
            "model": model.model.model_dump(),
            "data": {**task.data.model_dump(), "shuffle": False},
            "rubric": rubric,
            "rollout": rollout,
            "environment": task.environment.model_dump() if task.environment else None,
            "optim": {"seed": self.seed},
            "eval": {
                "samples_per_prompt": task.samples_per_prompt,
                "num_prompts": task.num_prompts,
                "checkpoint": model.checkpoint,
            },
        }

    def cell_spec(self, model: SuiteModelSpec, task: SuiteTaskSpec) -> RunSpec:
        return RunSpec.model_validate(self.cell_config(model, task))


def _refuse_repeats(what: str, names: list[str]) -> None:
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"{what} must be unique; repeated: {', '.join(dupes)}")
