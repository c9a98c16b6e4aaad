"""Where prompts come from: a dataset file or folder and its field names, or procedural tasks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from trainers.access import DATA, marks
from trainers.data.procedural.catalog import TASKS
from trainers.spec.base import Section, field_error


def _task_names() -> str:
    """The procedural tasks, from the catalogue: single-turn ones, then those that need an environment."""
    single = [name for name, info in TASKS.items() if info.environment is None]
    multi = [name for name, info in TASKS.items() if info.environment is not None]
    text = ", ".join(single) + (" (answers checked by exact_match on the answer field; with no environment, or"
                                " one that starts from the prompt, as tools with the calculator)")
    return text + (f", or the {' / '.join(multi)} environments (set the same environment)" if multi else "")


class ProceduralSpec(Section):
    """Generated problems (arithmetic, sorting, ...) instead of a dataset, at a difficulty the run
    raises or lowers to keep the pass rate in a target band (RLVE, arXiv:2511.07317)."""

    task: str = Field(
        "arithmetic",
        description=f"What to generate: {_task_names()}.",
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
        TASKS.get(v)  # UnknownNameError (a ValueError) lists the tasks
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
        hardest = TASKS.get(self.task).max_level
        if self.max_difficulty is not None and self.max_difficulty > hardest:
            raise field_error(self, "max_difficulty", f"task {self.task!r} has levels 1..{hardest}")
        if self.min_difficulty > self.highest:
            raise field_error(self, "min_difficulty", f"above max_difficulty ({self.highest})")
        if not self.min_difficulty <= self.start_difficulty <= self.highest:
            raise field_error(
                self, "start_difficulty", f"must lie in [{self.min_difficulty}, {self.highest}] (min..max difficulty)"
            )
        return self

    @property
    def highest(self) -> int:
        """max_difficulty, or the task's hardest level when it is empty."""
        return self.max_difficulty or TASKS.get(self.task).max_level

    @property
    def levels(self) -> range:
        return range(self.min_difficulty, self.highest + 1)

    @property
    def environment(self) -> str | None:
        """The environment kind the task runs in (lookup, guess_number), or None for a single turn."""
        return TASKS.get(self.task).environment


class DataSpec(Section):
    """The prompts: file or dataset folder (or generated problems), and which fields hold the prompt,
    answer and extras."""

    path: str | None = Field(
        None,
        min_length=1,
        description="JSONL, CSV or Parquet file, or a local Hugging Face dataset folder; empty with procedural.",
        json_schema_extra=marks(DATA),
    )
    procedural: ProceduralSpec | None = Field(
        None,
        description="Generate the prompts (with an adaptive difficulty) instead of reading a dataset.",
        examples=[{"task": TASKS.names()[0], "start_difficulty": 1, "adapt": True}],
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
    environment_dataset: bool = Field(
        False,
        description="Take the prompts from the environment's own tasks (a verifiers environment's taskset) instead "
        "of a dataset file; they are read when the run starts.",
    )
    skip_invalid_rows: bool = Field(
        False,
        description="Leave out the rows the run cannot use (not parsable, or a mapped field missing or wrong, as the "
        "dataset's check lists them) instead of stopping at the first; at least one row must be valid.",
    )

    @model_validator(mode="after")
    def _one_prompt_source(self) -> DataSpec:
        if not self.prompt_field and not self.messages_field:
            raise ValueError("set prompt_field or messages_field")
        if self.environment_dataset and (self.path is not None or self.procedural is not None):
            raise field_error(self, "environment_dataset", "the environment's tasks are the prompts: set no path")
        if self.path is None and self.procedural is None and not self.environment_dataset:
            raise field_error(self, "path", "set a dataset path, or procedural to generate the prompts")
        if self.path is not None and self.procedural is not None:
            raise field_error(
                self, "path", "a dataset path and procedural prompts are two prompt sources: set one of them"
            )
        return self
