"""The whole run: every section, the rules that cross sections, checkpoints, evaluation and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from trainers.access import DATA, MODEL, marks
from trainers.data.procedural.catalog import task_environments
from trainers.spec.algorithm import AlgorithmSpec
from trainers.spec.base import Section, error_at, field_error
from trainers.spec.curriculum import CurriculumSpec, step_rollouts
from trainers.spec.data import DataSpec
from trainers.spec.model import ModelSpec
from trainers.spec.optim import OptimSpec
from trainers.spec.parallel import ParallelSpec
from trainers.spec.rollout import EnvironmentSpec, RolloutSpec, TokenBounds, token_bounds
from trainers.spec.rubric import RewardSpec, RubricSpec
from trainers.spec.teacher import TeacherSpec
from trainers.spec.warm_up import WarmUpSpec


class CheckpointSpec(Section):
    """Where outputs go, how often to checkpoint (by steps, by minutes), what to resume from, and how many
    times the studio resumes the run by itself after losing its worker."""

    output_dir: str = Field("runs/out", description="Folder for checkpoints, metrics and rollouts.")
    every_n_steps: int = Field(0, ge=0, description="Save every N steps; 0 saves only at the end or on stop.")
    every_n_minutes: float = Field(
        0.0, ge=0, le=10_000,
        description="Also save once this many minutes have passed since the last checkpoint, so a schedule of "
        "long steps loses little to a crash; 0: off.",
    )  # fmt: skip
    max_restarts: int = Field(
        3, ge=0, le=100,
        description="Times the studio resumes the run by itself from its newest checkpoint when its worker is "
        "lost or stopped (preemption, a crash, a restart); 0: never.",
    )  # fmt: skip
    keep_last: int = Field(2, ge=1, description="Older checkpoints are deleted.")
    resume_from: str | None = Field(
        None, description="Checkpoint folder to resume from ('latest' finds the newest).",
        json_schema_extra=marks(MODEL, keywords=("latest",)),
    )  # fmt: skip
    save_final: bool = Field(
        True, description="Save a checkpoint when the run ends or is stopped (cancelled, or its worker shut down)."
    )


class EvalSpec(Section):
    """Evaluation-only runs: samples per prompt (pass@k), prompt count, checkpoint."""

    samples_per_prompt: int = Field(4, ge=1, le=1024, description="k samples per prompt (pass@k).")
    num_prompts: int | None = Field(None, ge=1, description="Evaluate only the first N prompts.")
    checkpoint: str | None = Field(
        None, description="Checkpoint folder to evaluate instead of model.path.", json_schema_extra=marks(MODEL)
    )


class ValidationSpec(Section):
    """Validation during training: held-out prompts sampled every N steps, their reward and pass@k
    reported as `val/` curves. The held-out prompts are a separate dataset (`path`) or a fraction
    of the training data kept out of training (`holdout_fraction`); set exactly one of the two."""

    path: str | None = Field(
        None,
        description="Held-out dataset: JSONL, CSV or Parquet file, or a local Hugging Face dataset folder. "
        "Empty: hold out a fraction of the training data instead.",
        json_schema_extra=marks(DATA),
    )
    format: Literal["auto", "jsonl", "csv", "parquet", "hf"] = Field("auto", description="auto: from the extension.")
    split: str = Field("validation", description="Split to use when the held-out dataset is a folder with several.")
    prompt_field: str | None = Field(None, description="Field with the prompt text; empty: as the training data.")
    messages_field: str | None = Field(
        None, description="Field with chat messages, instead of prompt text; empty: as the training data."
    )
    answer_field: str | None = Field(None, description="Field with the reference answer; empty: as the training data.")
    extra_fields: list[str] | None = Field(
        None, description="More fields handed to criteria by name; empty: as the training data."
    )
    holdout_fraction: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Hold out this share of the training rows (chosen by holdout_seed): they are never trained on.",
    )
    holdout_seed: int = Field(
        0,
        ge=0,
        description="Seeds which rows are held out; separate from the run's seed, so runs with different seeds "
        "validate on the same rows.",
    )
    every_n_steps: int = Field(10, ge=1, le=10_000_000, description="Validate after every N training steps.")
    at_start: bool = Field(True, description="Also validate before the first step: the step-0 baseline.")
    samples_per_prompt: int = Field(
        4, ge=1, le=1024, description="k: samples per held-out prompt (val/pass@1 ... val/pass@k)."
    )
    num_prompts: int | None = Field(None, ge=1, description="Validate on the first N held-out prompts; empty: all.")
    temperature: float | None = Field(
        None, ge=0, le=5, description="Sampling temperature for validation; empty: the rollout temperature."
    )

    @field_validator("split")
    @classmethod
    def _split_is_a_name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name the split, e.g. 'validation'")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> ValidationSpec:
        if self.path and self.holdout_fraction is not None:
            raise field_error(
                self, "holdout_fraction", "set either a held-out dataset (path) or a holdout_fraction, not both"
            )
        if not self.path and self.holdout_fraction is None:
            raise field_error(self, "path", "set a held-out dataset (path) or a holdout_fraction of the training data")
        return self

    def data_spec(self, train: DataSpec) -> DataSpec:
        """The held-out dataset (`path` set) as a DataSpec: this section's file, its field mapping where set and the
        training data's elsewhere, rendered as the training prompts are (template, system prompt, cap)."""
        mapping = {
            "prompt_field": self.prompt_field,
            "messages_field": self.messages_field,
            "answer_field": self.answer_field,
            "extra_fields": self.extra_fields,
        }
        update = {key: value for key, value in mapping.items() if value is not None}
        # limit: only the first num_prompts rows are validated on, so only those are read.
        update |= {"path": self.path, "format": self.format, "split": self.split, "limit": self.num_prompts}
        return DataSpec.model_validate({**train.model_dump(), **update})


class RunSpec(Section):
    """Everything one training or evaluation run needs; the one source of truth for settings."""

    name: str = Field("run", description="Human-readable run name.")
    model: ModelSpec
    data: DataSpec
    rubric: RubricSpec
    reward: RewardSpec = Field(default_factory=RewardSpec)
    algorithm: AlgorithmSpec = Field(default_factory=AlgorithmSpec)
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    environment: EnvironmentSpec | None = Field(
        None, description="Multi-turn environment (tools, a simulated user...); none: one turn per prompt."
    )
    optim: OptimSpec = Field(default_factory=OptimSpec)
    parallel: ParallelSpec = Field(default_factory=ParallelSpec)
    curriculum: CurriculumSpec = Field(default_factory=CurriculumSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    validation: ValidationSpec | None = Field(
        None, description="Validation on held-out prompts during training (val/ curves); none: no validation."
    )
    warm_up: WarmUpSpec | None = Field(
        None, description="A supervised cold start on example conversations before RL; none: RL starts from the model."
    )
    teacher: TeacherSpec | None = Field(
        None, description="On-policy distillation from teacher models or endpoints; none: no teacher."
    )

    @model_validator(mode="after")
    def _cross_field(self) -> RunSpec:
        a = self.algorithm
        if a.overlong_penalty and a.overlong_buffer >= self.rollout.max_new_tokens:
            raise ValueError("algorithm.overlong_buffer must be smaller than rollout.max_new_tokens")
        if a.dual_clip_c is not None and a.policy_loss != "ppo_clip":
            raise ValueError(f"algorithm.dual_clip_c applies to policy_loss 'ppo_clip' only, not {a.policy_loss!r}")
        if self.rollout.engine == "transformers" and self.rollout.vllm_server_url:
            raise ValueError("rollout.vllm_server_url is only used with engine='vllm'")
        if self.rollout.engine == "transformers" and self.rollout.dtype not in (None, "auto", self.model.dtype):
            raise error_at(self, ("rollout", "dtype"), self.rollout.dtype,
                           f"the transformers engine samples with the trained model, in model.dtype "
                           f"({self.model.dtype}): a sampling dtype of its own needs engine 'vllm'")  # fmt: skip
        if self.rollout.vllm_server_url and self.rollout.dtype not in (None, "auto"):
            raise error_at(self, ("rollout", "dtype"), self.rollout.dtype,
                           "a separate vLLM server samples in the dtype it was started with (its --dtype); "
                           "leave rollout.dtype empty (or auto) with rollout.vllm_server_url")  # fmt: skip
        c, prompts = self.curriculum, self.optim.prompts_per_step
        if (
            c.budget == "knapsack"
            and not prompts * c.min_group_size <= self.knapsack_rollouts <= prompts * c.max_group_size
        ):
            raise ValueError(
                f"curriculum: the knapsack budget of {self.knapsack_rollouts} rollouts per step cannot give each of "
                f"{prompts} prompts between min_group_size ({c.min_group_size}) and max_group_size "
                f"({c.max_group_size}) rollouts"
            )
        if c.hints:
            self._check_hints()
        if self.warm_up is not None and self.parallel.world_size > 1:
            raise error_at(self, ("warm_up", "path"), self.warm_up.path,
                           "the cold start runs in one process: run it with parallel.procs_per_node and nodes 1, "
                           "or cold-start the model in a run of its own and start this one from its output")  # fmt: skip
        return self

    def _check_hints(self) -> None:
        c, d = self.curriculum, self.data
        if self.environment is not None:
            raise ValueError("curriculum.hints open a single-turn answer; a run with an environment cannot use them")
        held = (["answer"] if d.answer_field else []) + list(d.extra_fields)
        if c.hint_field not in held:
            raise ValueError(
                f"curriculum.hint_field {c.hint_field!r} is not a field the rows carry; use one of: "
                + (", ".join(held) or "none (set data.answer_field or data.extra_fields)")
            )

    @model_validator(mode="after")
    def _procedural_fits(self) -> RunSpec:
        """A task with an environment of its own (lookup, guess_number) runs in that one. A single-turn task
        (arithmetic, sorting...) runs with no environment, or in one that starts from the row (tools, python:
        reset(row) gets the generated prompt and its answer), but not in another task's own environment."""
        procedural = self.data.procedural
        if procedural is None:
            return self
        wanted, kind = procedural.environment, self.environment.kind if self.environment else None
        if wanted is None and kind not in task_environments():
            return self
        if wanted != kind:
            needs = (
                f"the environment {wanted!r}"
                if wanted
                else f"no environment, or one that starts from its prompt (not {kind!r}, which makes its own puzzle)"
            )
            raise error_at(self, ("data", "procedural", "task"), procedural.task,
                            f"task {procedural.task!r} needs {needs}; the run's environment is {kind!r}")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _asynchronous_fits(self) -> RunSpec:
        """What the asynchronous pipeline (trainers.run.pipeline) runs with, refused by name otherwise."""
        a, where = self.rollout.asynchronous, ("rollout", "asynchronous")
        if a.over_provision > 1 and not (a.runs_ahead and a.partial_rollouts):
            raise error_at(self, (*where, "over_provision"), a.over_provision,
                           "over-provisioning keeps unfinished completions for later steps: it needs mode async, "
                           "max_staleness above 0 and partial_rollouts")  # fmt: skip
        if not a.runs_ahead:
            return self
        refusals = [
            (a.partial_rollouts and self.rollout.engine != "transformers", (*where, "partial_rollouts"), True,
             "partial rollouts sample with the transformers engine so far; with vLLM, mode async samples whole "
             "completions"),
            (self.parallel.world_size > 1, (*where, "mode"), a.mode,
             "the asynchronous pipeline runs in one process; use mode sync with several"),
            (self.curriculum.hints, ("curriculum", "hints"), True,
             "hinted retries resample a step's failed groups at once; they need mode sync"),
            (self.algorithm.info_gain_weight > 0, ("algorithm", "info_gain_weight"), self.algorithm.info_gain_weight,
             "IGPO's information gain runs on the sampler during generation; it needs mode sync"),
            (a.partial_rollouts and self.environment is not None, (*where, "partial_rollouts"), True,
             "partial rollouts continue single-turn completions; an environment's episodes run whole"),
            (a.partial_rollouts and bool(self.rollout.stop), (*where, "partial_rollouts"), True,
             "a stop string could straddle two segments and be missed: partial rollouts run without rollout.stop"),
        ]  # fmt: skip
        for refused, loc, value, message in refusals:
            if refused:
                raise error_at(self, loc, value, message)
        return self

    @model_validator(mode="after")
    def _sound_objective(self) -> RunSpec:
        a = self.algorithm
        if a.kl_beta > 0 and not a.kl_in_reward and a.kl_estimator == "k1":
            raise ValueError(
                "algorithm.kl_estimator 'k1' as a loss term has zero expected gradient on-policy (it adds noise, not "
                "regularisation): use 'k3' (or 'k2', 'abs') for a KL loss, or set kl_in_reward to keep k1 in the reward"
            )
        if a.policy_loss == "vanilla_pg" and a.ppo_epochs > 1:
            raise ValueError(
                "algorithm.policy_loss 'vanilla_pg' has no importance ratio, so passes after the first would train "
                "off-policy uncorrected: use ppo_epochs 1, or 'ppo_clip' for several passes"
            )
        return self

    @model_validator(mode="after")
    def _teacher_fits(self) -> RunSpec:
        """What distillation needs of the rest of the run (trainers.update.teachers), refused by name otherwise."""
        a, t = self.algorithm, self.teacher
        if t is None:
            if a.reward_advantage_weight == 0:
                raise error_at(self, ("algorithm", "reward_advantage_weight"), 0.0,
                               "a reward_advantage_weight of 0 leaves nothing to learn from without a teacher: add "
                               "a teacher section (pure distillation) or give the rubric's advantage a weight")  # fmt: skip
            return self
        d = self.data
        held = (["answer"] if d.answer_field else []) + list(d.extra_fields)
        if t.route_field and t.route_field not in held:
            raise error_at(self, ("teacher", "route_field"), t.route_field,
                           f"route_field {t.route_field!r} is not a field the rows carry; use one of: "
                           + (", ".join(held) or "none (set data.answer_field or data.extra_fields)"))  # fmt: skip
        if t.endpoints and self.rollout.temperature != 1.0:
            raise error_at(self, ("rollout", "temperature"), self.rollout.temperature,
                           "an endpoint teacher's logprobs are its distribution at temperature 1, which the "
                           "student's are compared with: sample at rollout.temperature 1 with an endpoint teacher")  # fmt: skip
        if a.dynamic_sampling and a.reward_advantage_weight == 0:
            raise error_at(self, ("algorithm", "dynamic_sampling"), True,
                           "dynamic sampling drops groups whose rewards agree, but in pure distillation every "
                           "group carries the teacher's signal: turn dynamic_sampling off")  # fmt: skip
        return self

    @property
    def loss_agg_norm(self) -> int:
        """Dr. GRPO's constant normaliser, resolved once: explicit value or max_new_tokens."""
        return self.algorithm.loss_agg_norm or self.rollout.max_new_tokens

    @property
    def token_bounds(self) -> TokenBounds:
        """How long a rollout may be: rollout.max_new_tokens per turn, and the environment's limits (`token_bounds`)."""
        env = self.environment
        if env is None:
            return token_bounds(self.rollout.max_new_tokens)
        return token_bounds(self.rollout.max_new_tokens, env.max_turns, env.max_turn_tokens, env.max_episode_tokens)

    @property
    def knapsack_rollouts(self) -> int:
        """The knapsack budget's rollouts per step, resolved once: explicit, or what fixed group sizes cost."""
        return step_rollouts("knapsack", self.optim.prompts_per_step, self.algorithm.group_size,
                             rollouts_per_step=self.curriculum.rollouts_per_step)  # fmt: skip

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts one generation round of a step samples, by the curriculum's budget (`step_rollouts`)."""
        c = self.curriculum
        return step_rollouts(c.budget, self.optim.prompts_per_step, self.algorithm.group_size,
                             rollouts_per_step=c.rollouts_per_step, max_group_size=c.max_group_size)  # fmt: skip
