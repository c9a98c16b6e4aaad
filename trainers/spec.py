"""RunSpec: the one typed, validated, JSON-serialisable description of a run.

The studio renders its forms from `RunSpec.model_json_schema()` and validates stored
configs with `RunSpec.model_validate`; the CLI reads the same thing from YAML.
Imports without torch. Presets are named bundles of values (see `PRESETS`), not code paths.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from trainers.algorithms.catalog import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, LOSS_AGG_MODES, POLICY_LOSSES
from trainers.curriculum.catalog import BUDGETS, SAMPLERS
from trainers.rewards.catalog import params_model
from trainers.rewards.formula import validate_formula


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _field_error(model: BaseModel, field: str, message: str) -> ValidationError:
    """An error a model validator raises under one of its fields (so forms show it beside that field)."""
    details = InitErrorDetails(type=_message(message), loc=(field,), input=getattr(model, field))
    return ValidationError.from_exception_data(type(model).__name__, [details])


def _error_at(model: BaseModel, loc: tuple[str, ...], value: Any, message: str) -> ValidationError:
    """An error a model validator raises at a nested field (`loc`), so forms show it beside that field."""
    details = InitErrorDetails(type=_message(message), loc=loc, input=value)
    return ValidationError.from_exception_data(type(model).__name__, [details])


def _located(exc: ValidationError, *prefix: str) -> ValidationError:
    """`exc` with each error's location under `prefix`."""
    details = [
        InitErrorDetails(type=_message(err["msg"].removeprefix("Value error, ")), loc=(*prefix, *err["loc"]),
                         input=err.get("input"))
        for err in exc.errors()
    ]  # fmt: skip
    return ValidationError.from_exception_data(exc.title, details)


def _message(text: str) -> PydanticCustomError:
    return PydanticCustomError("value_error", text.replace("{", "{{").replace("}", "}}"))


def _choice(catalog: dict[str, str], value: str, what: str) -> str:
    if value not in catalog:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(catalog)}")
    return value


class LoraSpec(Section):
    """LoRA adapters (peft) trained instead of the full weights."""

    r: int = Field(16, ge=1, le=1024, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha (scale = alpha / r).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA path.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="Module names to adapt (peft target_modules).",
    )


# A Hugging Face hub id: "name" or "owner/name", letters, digits, - _ . (as the hub's own check).
HUB_ID = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def looks_local(path: str) -> bool:
    """Whether a model path names a folder rather than a hub id: it starts with / . or ~, has more
    parts than owner/name or a '..' part (a hub id cannot), or exists here."""
    parts = path.split("/")
    return path.startswith(("/", ".", "~")) or len(parts) > 2 or ".." in parts or Path(path).expanduser().exists()


def model_path_shape_error(path: str) -> str | None:
    """Why `path` is neither a local folder path nor a well-formed hub id, or None.
    Checks the shape only: whether the folder exists is `model_folder_error`'s question, asked
    where the files are (the worker at run start, the studio for folders it shares with it)."""
    if looks_local(path):
        return None
    if HUB_ID.fullmatch(path) and "--" not in path and ".." not in path:
        return None
    return f"{path!r} is not a local folder (start it with / ./ or ~/) and not a hub id (owner/name)"


def model_folder_error(path: str, *, adapters_ok: bool = False) -> str | None:
    """Why the local folder `path` cannot hold a model, or None: it must exist and hold a config.json
    (or, with `adapters_ok`, a LoRA checkpoint's adapter_config.json). A hub id is not checked here."""
    if not looks_local(path):
        return None
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return f"folder {path} does not exist" if not folder.exists() else f"{path} is a file, not a model folder"
    names = ("config.json", "adapter_config.json") if adapters_ok else ("config.json",)
    if not any((folder / name).is_file() for name in names):
        return f"{path} has no config.json: not a model folder"
    return None


class ModelSpec(Section):
    """The policy to train: where it loads from, its dtype, memory savers and LoRA."""

    path: str = Field(..., min_length=1, description="Local folder or hub id of a causal LM (save_pretrained layout).")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Weights dtype for training; bfloat16 on recent GPUs."
    )
    trust_remote_code: bool = Field(False, description="Allow model code from the model folder.")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory in the backward pass.")
    disable_dropout: bool = Field(
        True,
        description="Set the model's dropout to 0 (LoRA's own dropout is kept): with dropout on, the policy that "
        "sampled differs from the one trained and the on-policy ratio is not 1.",
    )
    lora: LoraSpec | None = Field(None, description="Train LoRA adapters instead of all weights (peft).")
    ref_path: str | None = Field(None, description="Reference model for KL; defaults to the initial policy.")

    @field_validator("path", "ref_path")
    @classmethod
    def _folder_or_hub_id(cls, v: str | None) -> str | None:
        error = model_path_shape_error(v) if v else None
        if error:
            raise ValueError(error)
        return v


class ProceduralSpec(Section):
    """Generated problems (arithmetic, sorting, ...) instead of a dataset, at a difficulty the run
    raises or lowers to keep the pass rate in a target band (RLVE, arXiv:2511.07317)."""

    task: str = Field(
        "arithmetic",
        description="What to generate: arithmetic, sorting, counting, reverse, uppercase, rotate (answers checked "
        "by exact_match on the answer field), or the lookup / guess_number environments (set the same environment).",
    )
    start_difficulty: int = Field(1, ge=1, le=64, description="Difficulty level of the first step (1 is easiest).")
    min_difficulty: int = Field(1, ge=1, le=64, description="The level never goes below this.")
    max_difficulty: int | None = Field(
        None, ge=1, le=64, description="The level never goes above this; empty: the task's hardest level."
    )
    adapt: bool = Field(
        True,
        description="Move the level to keep the pass rate in the target band; off: stay at the start level. A "
        "rollout passes as curriculum.pass_reward says (rubric.pass_threshold when set).",
    )
    target_band: tuple[float, float] = Field(
        (0.25, 0.75),
        description="[low, high] pass rate: above high the level goes up one, below low it goes down one.",
    )
    window: int = Field(
        4, ge=1, le=10_000, description="Steps at a level whose mean pass rate decides a move (a move restarts it)."
    )
    pool_size: int = Field(
        256, ge=1, le=1_000_000, description="Training prompts generated per level, served shuffled epoch by epoch."
    )
    seed: int = Field(0, ge=0, description="Seeds the generated problems: the same seed, the same prompts.")
    held_out_per_level: int = Field(
        16, ge=0, le=100_000,
        description="Prompts per level kept for evaluation, never among the training prompts.",
    )  # fmt: skip

    @field_validator("task")
    @classmethod
    def _known_task(cls, v: str) -> str:
        from trainers.procedural.generators import GENERATORS

        GENERATORS.get(v)  # UnknownNameError (a ValueError) lists the tasks
        return v

    @field_validator("target_band")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        low, high = v
        if not 0 <= low < high <= 1:
            raise ValueError(f"target_band must be [low, high] with 0 <= low < high <= 1, got [{low}, {high}]")
        return v

    @model_validator(mode="after")
    def _levels_in_range(self) -> ProceduralSpec:
        from trainers.procedural.generators import GENERATORS

        hardest = GENERATORS.get(self.task).max_level
        if self.max_difficulty is not None and self.max_difficulty > hardest:
            raise _field_error(self, "max_difficulty", f"task {self.task!r} has levels 1..{hardest}")
        if self.min_difficulty > self.highest:
            raise _field_error(self, "min_difficulty", f"above max_difficulty ({self.highest})")
        if not self.min_difficulty <= self.start_difficulty <= self.highest:
            raise _field_error(
                self, "start_difficulty", f"must lie in [{self.min_difficulty}, {self.highest}] (min..max difficulty)"
            )
        return self

    @property
    def highest(self) -> int:
        """max_difficulty, or the task's hardest level when it is empty."""
        from trainers.procedural.generators import GENERATORS

        return self.max_difficulty or GENERATORS.get(self.task).max_level

    @property
    def levels(self) -> range:
        return range(self.min_difficulty, self.highest + 1)

    @property
    def environment(self) -> str | None:
        """The environment kind the task runs in (lookup, guess_number), or None for a single turn."""
        from trainers.procedural.generators import GENERATORS

        return GENERATORS.get(self.task).environment


class DataSpec(Section):
    """The prompts: file or dataset folder (or generated problems), and which fields hold the prompt,
    answer and extras."""

    path: str | None = Field(
        None,
        min_length=1,
        description="JSONL, CSV or Parquet file, or a local Hugging Face dataset folder; empty with procedural.",
    )
    procedural: ProceduralSpec | None = Field(
        None, description="Generate the prompts (with an adaptive difficulty) instead of reading a dataset."
    )
    format: Literal["auto", "jsonl", "csv", "parquet", "hf"] = Field("auto", description="auto: from the extension.")
    split: str = Field("train", description="Split to use for a dataset folder with several splits.")
    prompt_field: str | None = Field("prompt", description="Field with the prompt text.")
    messages_field: str | None = Field(
        None, description="Field with chat messages [{role, content}], instead of prompt text."
    )
    answer_field: str | None = Field(
        "answer", description="Field with the reference answer, handed to criteria as `answer`."
    )
    extra_fields: list[str] = Field(default_factory=list, description="More fields handed to criteria by name.")
    system_prompt: str | None = Field(None, description="System message prepended when a chat template is used.")
    use_chat_template: bool = Field(True, description="Apply the tokenizer's chat template when it has one.")
    max_prompt_tokens: int = Field(512, ge=8, le=131072, description="Longer prompts are truncated from the left.")
    shuffle: bool = Field(True, description="Shuffle prompts each epoch (seeded).")
    limit: int | None = Field(None, ge=1, description="Use only the first N rows.")

    @model_validator(mode="after")
    def _one_prompt_source(self) -> DataSpec:
        if not self.prompt_field and not self.messages_field:
            raise ValueError("set prompt_field or messages_field")
        if self.path is None and self.procedural is None:
            raise _field_error(self, "path", "set a dataset path, or procedural to generate the prompts")
        if self.path is not None and self.procedural is not None:
            raise _field_error(
                self, "path", "a dataset path and procedural prompts are two prompt sources: set one of them"
            )
        return self


class CriterionSpec(Section):
    name: str = Field(..., description="Short identifier; used in metric keys (reward/<name>/mean) and formulas.")
    kind: str = Field(..., description="Criterion kind; see trainers.rewards.catalog.CRITERION_KINDS.")
    weight: float = Field(1.0, ge=-100, le=100, description="Weight in the weighted sum.")
    params: dict[str, Any] = Field(default_factory=dict, description="Kind-specific parameters.")

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", v):
            raise ValueError("must be an identifier (letters, digits, _; not starting with a digit)")
        return v

    @model_validator(mode="after")
    def _params_match_kind(self) -> CriterionSpec:
        model = params_model(self.kind)
        try:
            self.__dict__["params"] = model.model_validate(self.params).model_dump()
        except ValidationError as exc:  # located under params.<name>, so forms show it beside that parameter
            raise _located(exc, "params") from None
        return self


class RubricSpec(Section):
    """The reward: weighted criteria, combined by a weighted sum or a formula."""

    criteria: list[CriterionSpec] = Field(..., description="Ordered weighted criteria.")
    combine: Literal["weighted_sum", "formula"] = Field(
        "weighted_sum", description="How criterion scores become one reward."
    )
    formula: str | None = Field(
        None,
        description="Expression over criterion names with + - * / min max abs clip, e.g. 'correct * min(format, 1)'.",
    )
    pass_threshold: float | None = Field(None, description="A completion 'passes' at reward >= this (for pass@k).")

    def warnings(self) -> dict[str, str]:
        """{"criteria.<i>.params.<name>": why} for valid settings worth a second look (a regex pattern
        with nested quantifiers): shown when the rubric is saved, never a refusal."""
        out = {}
        for i, c in enumerate(self.criteria):
            params = params_model(c.kind).model_validate(c.params)
            out.update({f"criteria.{i}.params.{name}": text for name, text in params.warnings().items()})
        return out

    @field_validator("criteria")
    @classmethod
    def _some_criterion(cls, v: list[CriterionSpec]) -> list[CriterionSpec]:
        if not v:
            raise ValueError("add at least one criterion: with none, the reward would be 0 for every rollout")
        return v

    @model_validator(mode="after")
    def _some_weight(self) -> RubricSpec:
        # A formula names the criteria it uses, so weights only matter to the weighted sum.
        if self.combine == "weighted_sum" and all(c.weight == 0 for c in self.criteria):
            raise _field_error(
                self, "criteria", "every criterion's weight is 0: the reward would be 0 for every rollout"
            )
        return self

    @model_validator(mode="after")
    def _check(self) -> RubricSpec:
        names = [c.name for c in self.criteria]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"criterion names must be unique; repeated: {', '.join(dupes)}")
        if self.combine == "formula" and not self.formula:
            raise ValueError("combine='formula' needs a formula")
        if self.combine == "formula":
            validate_formula(self.formula or "", names)  # unknown names, disallowed syntax: refused on save
        return self


class AlgorithmSpec(Section):
    """The RL method: group size, advantage estimator, policy loss, KL, clipping, sampling filters."""

    preset: str | None = Field(None, description="Preset these values started from (informational).")
    group_size: int = Field(8, ge=2, le=1024, description="Completions sampled per prompt (G).")
    advantage_estimator: str = Field("grpo", description="How rewards become advantages.")
    adv_eps: float = Field(1e-6, gt=0, description="Added to the std in normalisation.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount for token-level returns (REINFORCE++).")
    policy_loss: str = Field("ppo_clip", description="Surrogate objective.")
    clip_ratio_low: float = Field(0.2, ge=0, le=10, description="Ratio lower clip: 1 - clip_ratio_low.")
    clip_ratio_high: float = Field(
        0.2, ge=0, le=10, description="Ratio upper clip: 1 + clip_ratio_high (clip-higher, DAPO)."
    )
    dual_clip_c: float | None = Field(
        None, gt=1, description="Dual-clip bound for negative advantages (e.g. 3.0); off when empty."
    )
    loss_agg_mode: str = Field("seq-mean-token-mean", description="How per-token losses are reduced.")
    loss_agg_norm: int | None = Field(
        None, ge=1, description="Constant for seq-mean-token-sum-norm; defaults to rollout.max_new_tokens."
    )
    kl_beta: float = Field(0.0, ge=0, le=10, description="KL coefficient; 0 means no reference model is loaded.")
    kl_estimator: str = Field("k3", description="KL estimator.")
    kl_in_reward: bool = Field(False, description="Subtract beta*KL from token rewards instead of adding a loss term.")
    entropy_coef: float = Field(0.0, ge=0, le=1, description="Entropy bonus coefficient.")
    ppo_epochs: int = Field(1, ge=1, le=16, description="Optimisation passes over each batch of rollouts.")
    dynamic_sampling: bool = Field(False, description="DAPO: drop groups whose rewards all agree, sample more prompts.")
    dynamic_sampling_max_rounds: int = Field(4, ge=1, le=64, description="Cap on extra generation rounds per step.")
    overlong_filter: bool = Field(False, description="Mask the loss of truncated completions.")
    overlong_penalty: bool = Field(False, description="DAPO soft overlong punishment.")
    overlong_buffer: int = Field(16, ge=1, description="Tokens before max_new_tokens where the soft penalty ramps up.")
    overlong_penalty_factor: float = Field(1.0, ge=0, description="Penalty at max_new_tokens.")
    turn_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="mt_grpo: weight of the turn-level advantages (this turn's and later turns' normalised turn "
        "rewards) added to the outcome advantage; 0 is GRPO on the outcome.",
    )
    step_advantage_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="gigpo: weight omega of the step advantage (step returns normalised among turns taken from the "
        "same environment state) added to the episode advantage; 0 is GRPO.",
    )
    info_gain_weight: float = Field(
        0.0,
        ge=0,
        le=100,
        description="IGPO: add to each turn's reward this times the gain in the policy's log-probability of the "
        "reference answer over the turn (one extra forward pass per turn); 0 is off.",
    )
    info_gain_answer_field: str = Field(
        "answer", min_length=1, description="IGPO: the dataset field holding each row's reference answer."
    )
    tis_cap: float | None = Field(
        None, gt=0, description="Truncated importance-sampling cap for engine/trainer logprob mismatch (vLLM)."
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str | None) -> str | None:
        return _choice(PRESETS, v, "preset") if v else None  # PRESETS is defined below; read at validation

    @field_validator("advantage_estimator")
    @classmethod
    def _adv(cls, v: str) -> str:
        return _choice(ADVANTAGE_ESTIMATORS, v, "advantage estimator")

    @field_validator("policy_loss")
    @classmethod
    def _loss(cls, v: str) -> str:
        return _choice(POLICY_LOSSES, v, "policy loss")

    @field_validator("loss_agg_mode")
    @classmethod
    def _agg(cls, v: str) -> str:
        return _choice(LOSS_AGG_MODES, v, "loss aggregation mode")

    @field_validator("kl_estimator")
    @classmethod
    def _kl(cls, v: str) -> str:
        return _choice(KL_ESTIMATORS, v, "KL estimator")


class RewardSpec(Section):
    """Watching the reward while a run trains: when criteria that fail on many rollouts warn, or stop it."""

    failure_warn_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Warn when a criterion fails (raises, times out) on more than this share of a step's rollouts: "
        "a failed criterion scores 0, so the run would otherwise look like it learns nothing.",
    )
    stop_after_failing_steps: int = Field(
        0, ge=0, description="End the run failed after this many steps in a row above that share; 0 never stops."
    )


class RolloutSpec(Section):
    """Generation: engine, sampling parameters and response length."""

    engine: Literal["transformers", "vllm"] = Field("transformers", description="Generation back-end.")
    max_new_tokens: int = Field(64, ge=1, le=131072, description="Completion length cap.")
    temperature: float = Field(1.0, ge=0, le=5, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling.")
    top_k: int = Field(0, ge=0, description="Top-k sampling; 0 disables.")
    stop: list[str] = Field(default_factory=list, description="Stop strings (besides EOS).")
    generation_batch_size: int = Field(64, ge=1, description="Sequences generated per engine call.")
    vllm_gpu_memory_utilization: float = Field(
        0.3,
        gt=0,
        le=0.95,
        description="vLLM: fraction of GPU memory it may hold (on the CPU build: at most this "
        "fraction of host memory for its KV cache, sized to one rollout batch).",
    )
    vllm_sleep_during_update: bool = Field(
        True, description="vLLM colocated: release memory during the update (GPU only; the CPU build has no sleep)."
    )
    vllm_enforce_eager: bool = Field(
        False, description="vLLM: no graph compilation (torch.compile, CUDA graphs): starts in seconds, samples slower."
    )
    vllm_server_url: str | None = Field(None, description="vLLM: use a separate server instead of colocating.")


class EnvironmentSpec(Section):
    """What the model acts in over several turns; none means one turn and done."""

    kind: str = Field(..., description="Environment kind; see trainers.environments.kinds.")
    params: dict[str, Any] = Field(default_factory=dict, description="Kind-specific parameters.")
    max_turns: int = Field(4, ge=1, le=256, description="Model turns per episode; the episode ends after the last.")
    max_episode_tokens: int = Field(
        1024, ge=8, le=131072, description="Tokens after the prompt (sampled + observation) before the episode ends."
    )
    max_turn_tokens: int = Field(256, ge=1, le=131072, description="Tokens the model may sample in one turn.")
    tool_timeout_s: float = Field(5.0, gt=0, le=600, description="Wall-clock limit of one tool call.")
    tool_memory_mb: int = Field(512, ge=32, le=65536, description="Memory limit of a sandboxed tool or environment.")
    max_observation_chars: int = Field(
        2000, ge=16, le=1_000_000, description="Longer tool results are cut, with a note saying so."
    )

    @model_validator(mode="after")
    def _params_match_kind(self) -> EnvironmentSpec:
        from trainers.environments.kinds import ENVIRONMENTS

        model = ENVIRONMENTS.get(self.kind).params_model  # UnknownNameError (a ValueError) lists the kinds
        try:
            self.__dict__["params"] = model.model_validate(self.params).model_dump()
        except ValidationError as exc:
            raise _located(exc, "params") from None
        return self

    def limits(self):
        """The per-episode limits as the rollout code takes them."""
        from trainers.environments.base import EpisodeLimits

        return EpisodeLimits(
            max_turns=self.max_turns,
            max_episode_tokens=self.max_episode_tokens,
            max_turn_tokens=self.max_turn_tokens,
            tool_timeout_s=self.tool_timeout_s,
            tool_memory_mb=self.tool_memory_mb,
            max_observation_chars=self.max_observation_chars,
        )


# Both chosen by measurement (bench/logprob_memory.py; table in bench/README.md). One forward +
# backward of 8 x 512 completion tokens at a 151,936 vocabulary, hidden 512, float32: whole logits
# added 12.5 GiB and 44.7 s CPU, chunks of 1,024 tokens (594 MiB of logits) 4.1 GiB and 53.1 s (the
# head's forward runs again in the backward), 512 tokens 2.8 GiB and 53.1 s, 256 tokens 2.0 GiB and
# 51.3 s, 220 tokens 1.8 GiB and 45.2 s (1 thread): below ~1,000 tokens per chunk time stops growing, so the budget is set in logits bytes,
# which sizes the chunk by the vocabulary: 128 MiB is 220 tokens at 151,936, 262 at Llama 3's
# 128,256, and a tiny vocabulary's whole micro-batch (768 entries: 43,690 tokens), computed as before.
# bfloat16 autocast took 31-27 % less CPU than float32 at that shape (whole / chunked), none at the
# tiny model's (0.09 vs 0.10 s), and moves logprobs by up to 0.004 (mean 0.001) from the float32
# ones the engine samples with, widening the sampler / trainer gap: float32 stays the default,
# bfloat16 is the choice for large vocabularies.
LOGPROB_CHUNK_MIB = 128
LOGPROB_CHUNK_HELP = (
    "MiB of float32 logits that exist at once when computing logprobs and entropy: the LM head runs "
    "over as many completion tokens at a time as fit (MiB / (vocabulary x 4 bytes)), and with "
    "gradients recomputes each chunk in the backward pass instead of keeping it. 0 computes the "
    "micro-batch's whole logits at once. 128 MiB is 220 tokens at a 151,936-token vocabulary, where "
    "it cut one 8 x 512-token forward + backward's memory from 12.5 to 1.8 GiB; a small vocabulary's "
    "micro-batch stays one chunk."
)
PRECISION = "float32"
PRECISION_HELP = (
    "Arithmetic of the trainer's forward and backward passes. bfloat16 runs them under autocast "
    "(weights stay in the model's dtype; logprobs, ratios and the loss stay float32): about 30 % "
    "faster at a 151,936-token vocabulary on a CPU with AVX512-BF16, no faster on tiny models, "
    "and logprobs within 0.02 of float32's (loss within 2e-3 on the test batch)."
)


class OptimSpec(Section):
    """Optimisation: learning rate and schedule, batch sizes, steps, gradient clipping, seed."""

    lr: float = Field(1e-6, gt=0, le=1, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW weight decay.")
    beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    beta2: float = Field(0.999, ge=0, lt=1, description="AdamW beta2.")
    lr_scheduler: Literal["constant", "linear", "cosine"] = Field("constant", description="Schedule after warm-up.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    max_grad_norm: float | None = Field(1.0, gt=0, description="Gradient clipping; empty disables.")
    prompts_per_step: int = Field(
        8,
        ge=1,
        le=65536,
        description="Prompts per step; rollouts = prompts x group_size under the fixed budget (curriculum.budget "
        "sets others).",
    )
    micro_batch_size: int = Field(
        8, ge=1, description="Sequences per forward/backward with 'padded' micro-batching; the rest is accumulated."
    )
    # Defaults by measurement (bench/micro_batching.py and its README section: this 2-core CPU, hidden
    # 512, 32 completions of 16-512 tokens): balanced@2048 within 4 % of padded (noise: the same tokens
    # computed), balanced@4096 15 % slower on spread lengths (wider passes, more padding), packed 1.3-2.1x
    # slower (CPU sdpa computes a packed row's whole masked L x L attention, and each sequence carries its
    # own prompt). Packing is meant for flash-attention's varlen path on a GPU (not measured here).
    micro_batching: Literal["padded", "balanced", "packed"] = Field(
        "padded",
        description="How sequences are grouped into forward/backward passes. padded: micro_batch_size sequences "
        "of similar length each (fastest on CPU); balanced: sequences of similar length up to micro_batch_tokens "
        "(padding included), so short ones share a pass and a pass's memory is bounded; packed: sequences laid "
        "end to end in rows of up to micro_batch_tokens, no padding computed (for GPUs with flash-attention). "
        "Same gradient whichever you choose; only speed and memory differ.",
    )
    micro_batch_tokens: int = Field(
        2048,
        ge=16,
        le=1_048_576,
        description="Tokens (prompt + completion) per forward/backward with 'balanced' or 'packed' "
        "micro-batching; a longer sequence gets a pass of its own.",
    )
    total_steps: int = Field(100, ge=1, le=10_000_000, description="Optimiser steps to run.")
    seed: int = Field(0, ge=0, description="Seeds data order, sampling and initialisation.")
    logprob_chunk_mib: float = Field(LOGPROB_CHUNK_MIB, ge=0, le=1_048_576, description=LOGPROB_CHUNK_HELP)
    precision: Literal["float32", "bfloat16"] = Field(PRECISION, description=PRECISION_HELP)


class CurriculumSpec(Section):
    """Which prompts each step draws and how many rollouts each gets: samplers, budgets, per-prompt statistics."""

    sampler: str = Field("uniform", description="How each step's prompts are chosen (uniform keeps the data order).")
    budget: str = Field("fixed", description="How many rollouts each chosen prompt gets (fixed: group_size each).")
    pass_reward: float = Field(
        1.0,
        ge=-1e6,
        le=1e6,
        description="A rollout passes when its reward is at least this; rubric.pass_threshold, when set, decides "
        "instead. Passes feed each prompt's pass-rate estimate.",
    )
    prior_alpha: float = Field(
        1.0, gt=0, le=1000, description="Beta prior of an unseen prompt's pass rate: pseudo-passes (1 and 1: uniform)."
    )
    prior_beta: float = Field(
        1.0, gt=0, le=1000, description="Beta prior of an unseen prompt's pass rate: pseudo-fails."
    )
    decay: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Forgetting: before each update a prompt's posterior moves this far from the prior back to it "
        "(alpha = decay * alpha + (1 - decay) * prior_alpha + passes); 1 keeps every past rollout, lower follows a "
        "model that changes.",
    )
    target_pass_rate: float = Field(
        0.5, gt=0, lt=1, description="online_difficulty: the pass rate it steers toward (0.5 gives the most signal)."
    )
    exploration_floor: float = Field(
        0.25,
        ge=0,
        le=1,
        description="online_difficulty: each prompt slot is drawn in data order with this probability, so no "
        "prompt starves.",
    )
    skip_after: int = Field(
        3,
        ge=1,
        le=1000,
        description="skip_solved: skip a prompt after this many all-pass (or all-fail) groups in a row.",
    )
    skip_failed: bool = Field(True, description="skip_solved: also skip prompts failed skip_after times in a row.")
    recheck_rate: float = Field(
        0.1, ge=0, le=1, description="skip_solved: probability that a skipped prompt is drawn anyway, to re-check it."
    )
    rollouts_per_step: int | None = Field(
        None,
        ge=2,
        le=1_000_000,
        description="knapsack: rollouts per step shared among the step's prompts; empty: prompts_per_step x "
        "group_size (the same cost as fixed).",
    )
    min_group_size: int = Field(2, ge=2, le=4096, description="knapsack: fewest rollouts a chosen prompt gets.")
    max_group_size: int = Field(
        32, ge=2, le=4096, description="knapsack: most rollouts one prompt gets; brorl: every prompt's group size."
    )
    generation_chunk: int = Field(
        64, ge=1, le=65536, description="brorl: sequences generated per engine call, so large groups fit in memory."
    )
    # Hints (trainers.curriculum.hints; GHPO, arXiv:2507.10628).
    hints: bool = Field(
        False,
        description="Retry a prompt whose whole group failed with the start of its reference solution opening the "
        "answer; the hinted group trains in its place, and the hint's tokens are never trained on.",
    )
    hint_field: str = Field(
        "answer",
        min_length=1,
        description="Row field holding the reference solution the hint is cut from: 'answer' (the data's answer "
        "field) or one of data.extra_fields.",
    )
    hint_start_fraction: float = Field(
        0.5, gt=0, lt=1, description="Share of the solution's tokens given the first time a prompt is hinted."
    )
    hint_min_fraction: float = Field(
        0.1, gt=0, lt=1, description="Shortest hint, as a share of the solution: shrinking stops here."
    )
    hint_max_fraction: float = Field(
        0.9, gt=0, lt=1, description="Longest hint, as a share of the solution: growing stops here."
    )
    hint_shrink: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="A prompt's hint is multiplied by this each time its hinted group passes, and divided by it "
        "when the hinted group fails too; the prompt passing without a hint drops its hint.",
    )
    hint_max_retries: int = Field(
        1, ge=1, le=8, description="Hinted retries of a failed group per step, each longer than the last."
    )

    @field_validator("sampler")
    @classmethod
    def _sampler(cls, v: str) -> str:
        return _choice(SAMPLERS, v, "prompt sampler")

    @field_validator("budget")
    @classmethod
    def _budget(cls, v: str) -> str:
        return _choice(BUDGETS, v, "rollout budget")

    @model_validator(mode="after")
    def _group_bounds(self) -> CurriculumSpec:
        if self.min_group_size > self.max_group_size:
            raise _field_error(self, "min_group_size", "min_group_size must not exceed max_group_size")
        return self

    @model_validator(mode="after")
    def _hint_bounds(self) -> CurriculumSpec:
        if not self.hint_min_fraction <= self.hint_start_fraction <= self.hint_max_fraction:
            raise _field_error(
                self,
                "hint_start_fraction",
                "hint_start_fraction must lie between hint_min_fraction and hint_max_fraction",
            )
        return self


class CheckpointSpec(Section):
    """Where outputs go, how often to checkpoint, and what to resume from."""

    output_dir: str = Field("runs/out", description="Folder for checkpoints, metrics and rollouts.")
    every_n_steps: int = Field(0, ge=0, description="Save every N steps; 0 saves only at the end or on stop.")
    keep_last: int = Field(2, ge=1, description="Older checkpoints are deleted.")
    resume_from: str | None = Field(None, description="Checkpoint folder to resume from ('latest' finds the newest).")
    save_final: bool = Field(True, description="Save a checkpoint when the run ends or is stopped.")


class EvalSpec(Section):
    """Evaluation-only runs: samples per prompt (pass@k), prompt count, checkpoint."""

    samples_per_prompt: int = Field(4, ge=1, le=1024, description="k samples per prompt (pass@k).")
    num_prompts: int | None = Field(None, ge=1, description="Evaluate only the first N prompts.")
    checkpoint: str | None = Field(None, description="Checkpoint folder to evaluate instead of model.path.")


class ValidationSpec(Section):
    """Validation during training: held-out prompts sampled every N steps, their reward and pass@k
    reported as `val/` curves. The held-out prompts are a separate dataset (`path`) or a fraction
    of the training data kept out of training (`holdout_fraction`); set exactly one of the two."""

    path: str | None = Field(
        None,
        description="Held-out dataset: JSONL, CSV or Parquet file, or a local Hugging Face dataset folder. "
        "Empty: hold out a fraction of the training data instead.",
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
            raise _field_error(
                self, "holdout_fraction", "set either a held-out dataset (path) or a holdout_fraction, not both"
            )
        if not self.path and self.holdout_fraction is None:
            raise _field_error(self, "path", "set a held-out dataset (path) or a holdout_fraction of the training data")
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
    curriculum: CurriculumSpec = Field(default_factory=CurriculumSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    validation: ValidationSpec | None = Field(
        None, description="Validation on held-out prompts during training (val/ curves); none: no validation."
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
        procedural = self.data.procedural
        if procedural is None:
            return self
        wanted, kind = procedural.environment, self.environment.kind if self.environment else None
        if wanted != kind:
            needs = f"the environment {wanted!r}" if wanted else "no environment (it is a single-turn task)"
            raise _error_at(self, ("data", "procedural", "task"), procedural.task,
                            f"task {procedural.task!r} needs {needs}; the run's environment is {kind!r}")  # fmt: skip
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

    @property
    def loss_agg_norm(self) -> int:
        """Dr. GRPO's constant normaliser, resolved once: explicit value or max_new_tokens."""
        return self.algorithm.loss_agg_norm or self.rollout.max_new_tokens

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


def step_rollouts(budget: str, prompts: int, group_size: int, *, rollouts_per_step: int | None = None,
                  max_group_size: int = 32) -> int:  # fmt: skip
    """Rollouts one generation round of a step samples for `prompts` prompts under the rollout budget
    `budget` (trainers.curriculum.budgets): fixed gives each prompt group_size; knapsack shares
    rollouts_per_step among them (empty: what fixed costs; the spec keeps it within min..max_group_size
    per prompt); brorl gives each max_group_size. The studio's step cost (and its JavaScript twin,
    experiment_form.js stepCost) count with this."""
    if budget == "fixed":
        return prompts * group_size
    if budget == "knapsack":
        return rollouts_per_step or prompts * group_size
    if budget == "brorl":
        return prompts * max_group_size
    raise ValueError(f"unknown rollout budget {budget!r}; known: {', '.join(BUDGETS)}")


# Presets: named bundles of AlgorithmSpec values. Everything not named keeps its default.
PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {  # DeepSeekMath, arXiv:2402.03300
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "seq-mean-token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.04,
        "kl_estimator": "k3",
    },
    "dr_grpo": {  # Understanding R1-Zero-Like Training, arXiv:2503.20783
        "advantage_estimator": "dr_grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "seq-mean-token-sum-norm",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.0,
    },
    "dapo": {  # arXiv:2503.14476
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "kl_beta": 0.0,
        "dynamic_sampling": True,
        "overlong_penalty": True,
    },
    "gspo": {  # arXiv:2507.18071
        "advantage_estimator": "grpo",
        "policy_loss": "gspo",
        "loss_agg_mode": "seq-mean-token-mean",
        "clip_ratio_low": 3e-4,
        "clip_ratio_high": 4e-4,
        "kl_beta": 0.0,
    },
    "rloo": {  # Back to Basics, arXiv:2402.14740
        "advantage_estimator": "rloo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.05,
        "kl_estimator": "k1",
        "kl_in_reward": True,
    },
    "reinforce_pp": {  # arXiv:2501.03262
        "advantage_estimator": "reinforce_pp",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.01,
        "kl_estimator": "k1",
        "kl_in_reward": True,
    },
    "reinforce_pp_baseline": {
        "advantage_estimator": "reinforce_pp_baseline",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.01,
        "kl_estimator": "k3",
        "kl_in_reward": False,
    },
    "lite_ppo": {  # Tricks or Traps? arXiv:2508.08221: group-mean + batch-std, token-level loss
        "advantage_estimator": "group_mean_batch_std",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "kl_beta": 0.0,
    },
    # ReTool, arXiv:2504.11536, as verl's recipe/retool (run_qwen2_7b_dapo.sh): code-interpreter RL on
    # the outcome only (trajectory-level GRPO; interpreter output is masked from the loss, as every
    # observation is here), DAPO's clip-higher and token-mean loss, no KL. The paper samples 16 per prompt.
    "retool": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        "kl_beta": 0.0,
        "overlong_filter": True,
    },
    # Search-R1, arXiv:2503.09516 (its GRPO runs): retrieved passages masked from the loss (every
    # observation is here), clip 0.2, a small k3 KL loss (0.001). The paper samples 5 per prompt.
    "search_agent": {
        "advantage_estimator": "grpo",
        "policy_loss": "ppo_clip",
        "loss_agg_mode": "token-mean",
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.2,
        "kl_beta": 0.001,
        "kl_estimator": "k3",
        "kl_in_reward": False,
    },
}

# Each description ends with how the preset differs from verl's actor defaults (token-mean loss,
# clip 0.2/0.2, dual-clip c = 3 always on, no KL; a KL loss is k3 at 0.001), so a team comparing
# with a verl run knows what to set. No preset turns dual-clip on (algorithm.dual_clip_c).
PRESET_DESCRIPTIONS: dict[str, str] = {
    "grpo": "GRPO (DeepSeekMath): group mean/std advantages, clipped ratio, k3 KL loss. "
    "vs verl: seq-mean-token-mean loss, KL loss beta 0.04 (the paper's), no dual-clip.",
    "dr_grpo": "Dr. GRPO: no std division, constant-normalised token sum, no KL. "
    "vs verl: seq-mean-token-sum-norm loss, no dual-clip.",
    "dapo": "DAPO: clip-higher, token-mean loss, dynamic sampling, soft overlong punishment. "
    "vs verl: clip high 0.28, no dual-clip.",
    "gspo": "GSPO: sequence-level importance ratio with tight clipping. "
    "vs verl: seq-mean-token-mean loss, clip 0.0003/0.0004, no dual-clip.",
    "rloo": "RLOO: leave-one-out baseline, KL folded into the reward. "
    "vs verl: k1 KL in the reward (beta 0.05), no dual-clip.",
    "reinforce_pp": "REINFORCE++: batch-whitened token returns with KL in the reward. "
    "vs verl: k1 KL in the reward (beta 0.01), no dual-clip.",
    "reinforce_pp_baseline": "REINFORCE++-baseline: group-mean baseline, batch-std normalisation. "
    "vs verl: k3 KL loss beta 0.01, no dual-clip.",
    "lite_ppo": "Lite PPO: group-mean advantages over the batch std of the rewards, token-level loss. "
    "vs verl: no dual-clip.",
    "retool": "ReTool: tool-integrated (code interpreter) RL on the final answer, tool output never trained on; "
    "clip-higher, token-mean loss, no KL, truncated episodes left out of the loss. "
    "vs verl: clip high 0.28, no dual-clip (verl's ReTool recipe sets c = 10).",
    "search_agent": "Search-R1: a search agent trained with GRPO on the final answer, retrieved text never trained "
    "on; clip 0.2, small KL loss. vs verl: k3 KL loss beta 0.001, no dual-clip.",
}


def preset_values(name: str) -> dict[str, Any]:
    """AlgorithmSpec values of a preset (a fresh copy)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return {**copy.deepcopy(PRESETS[name]), "preset": name}


def apply_preset(config: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of a RunSpec config dict whose algorithm section starts from the preset;
    keys the config sets explicitly in `algorithm` win over the preset."""
    out = copy.deepcopy(config)
    out["algorithm"] = {**preset_values(name), **out.get("algorithm", {})}
    return out


def validation_errors(exc: ValidationError) -> dict[str, str]:
    """Flatten pydantic errors to {"algorithm.clip_ratio_low": "Input should be ..."} for forms and APIs."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "__all__"
        out[loc] = err["msg"].removeprefix("Value error, ")
    return out
