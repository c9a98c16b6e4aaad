"""What a run reports, and the protocol it reports through.

Plain dataclasses (no torch) so the studio and the workers can build and read them.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

RUN_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
# What `should_stop()` answers for a stop without a checkpoint ("Stop now"); any other true answer stops
# and saves one (trainers.run.stopping).
STOP_NOW = "now"
# A step's token counts (trainers.run.step_metrics): the whole step's, summed over processes rather than
# averaged like the other metrics (trainers.scale.distributed.mean_over_processes). The worker sums them over
# the steps into the run's usage (studio.runs.usage).
COUNTS_PREFIX = "tokens/"
TOKENS_GENERATED, TOKENS_TRAINED = f"{COUNTS_PREFIX}generated", f"{COUNTS_PREFIX}trained"


@dataclass
class CriterionScore:
    """One criterion's verdict on one completion. `error` is set when the criterion failed (score is then 0)."""

    score: float
    explanation: str = ""
    error: str | None = None


@dataclass
class Rollout:
    """One sampled completion, scored. `prompt`/`completion` are text or a list of chat turns.
    `prompt_id` names the completion's group within its step: the dataset row's id, with "@k"
    for the k-th time that row was drawn in the same step."""

    step: int
    prompt_id: str
    sample_index: int
    prompt: str | list[dict[str, Any]]
    completion: str | list[dict[str, Any]]
    reward: float
    scores: dict[str, CriterionScore] = field(default_factory=dict)
    advantage: float = 0.0
    num_tokens: int = 0
    finish_reason: str = "stop"  # "stop" | "length"
    logprobs: list[float] | None = None
    # False for groups the update did not train on: dropped by dynamic sampling (outcomes agree)
    # or generated beyond the step's batch by its last round (the surplus). Their advantage is 0.
    trained: bool = True
    # Multi-turn episodes: each turn as `trainers.episodes.Turn.to_dict` makes it; None for a single-turn completion.
    turns: list[dict[str, Any]] | None = None
    end_reason: str | None = None  # "done" | "turn_limit" | "token_budget" | "error" (multi-turn only)
    error: str | None = None  # end_reason "error": what the environment raised
    # A hinted retry (trainers.curriculum.hints): the start of the reference solution that opened the
    # answer (never trained on; `completion` is what the model wrote after it) and its fraction of the
    # solution's tokens. None: not hinted.
    hint: str | None = None
    hint_fraction: float | None = None
    # "train": sampled for a training step; "validation": sampled from a held-out prompt after the step
    # `step` (trainers.run.validation), never trained on.
    split: str = "train"
    # The policy versions that sampled the completion, as runs [[version, tokens], ...] (several with
    # partial rollouts), and its staleness: versions between its oldest token's and the weights the step
    # trained from (0 in a synchronous run). None: not recorded (evaluation, validation).
    policy_versions: list[list[int]] | None = None
    staleness: int | None = None
    # On-policy distillation (trainers.update.teachers): [[token text, the teacher's per-token reverse KL or
    # None], ...] over the completion's tokens (its length is bounded as the completion's); None: no teacher.
    teacher_tokens: list[list[Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollout:
        data = dict(data)
        data["scores"] = {k: CriterionScore(**v) for k, v in data.get("scores", {}).items()}
        return cls(**data)


class Reporter(Protocol):
    """Where a run sends what it produces. Implementations: CLI (JSONL + progress bar),
    the Celery worker (database rows + channel layer), tests (in memory).

    `warning` is for what the person running it should see while the run goes on (criteria
    failing on most rollouts, prompts cut to max_prompt_tokens): the studio shows it as a banner.

    `prompt_stats` carries, after each step, one dict per prompt drawn in it
    (`trainers.curriculum.stats.PromptStats.event`): prompt_id, draws, alpha, beta, pass_rate
    (posterior mean), pass_rate_std, last_step, status (unseen | solved | learnable |
    never_solved), step_passed and step_samples (this step's group)."""

    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def rollouts(self, step: int, rollouts: list[Rollout]) -> None: ...
    def status(self, state: str, detail: str = "") -> None: ...
    def checkpoint(self, step: int, path: str) -> None: ...
    def log(self, line: str) -> None: ...
    def warning(self, step: int | None, message: str) -> None: ...
    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None: ...


class MemoryReporter:
    """Keeps everything in lists; for tests and notebooks."""

    def __init__(self) -> None:
        self.metric_points: list[tuple[int, dict[str, float]]] = []
        self.rollout_batches: list[tuple[int, list[Rollout]]] = []
        self.states: list[tuple[str, str]] = []
        self.checkpoints: list[tuple[int, str]] = []
        self.lines: list[str] = []
        self.warnings: list[tuple[int | None, str]] = []
        self.prompt_stat_batches: list[tuple[int, list[dict[str, Any]]]] = []

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.metric_points.append((step, dict(values)))

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self.rollout_batches.append((step, list(rollouts)))

    def status(self, state: str, detail: str = "") -> None:
        self.states.append((state, detail))

    def checkpoint(self, step: int, path: str) -> None:
        self.checkpoints.append((step, path))

    def log(self, line: str) -> None:
        self.lines.append(line)

    def warning(self, step: int | None, message: str) -> None:
        self.warnings.append((step, message))

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        self.prompt_stat_batches.append((step, [dict(s) for s in stats]))

    def series(self, key: str) -> list[float]:
        """Values of one metric key in step order."""
        return [values[key] for _, values in self.metric_points if key in values]


class PlainFailure(Exception):
    """A failure whose message says all a user needs, in one line: what went wrong and what to do
    (a model the Hub would not give). The run's error is that message alone, without the exception's
    type or the log's last lines; the traceback still goes to the run's log."""


def failure_detail(exc: BaseException) -> str:
    """What a run's status says about the exception that ended it: a PlainFailure's message, else
    "<type>: <message>"."""
    return str(exc) if isinstance(exc, PlainFailure) else f"{type(exc).__name__}: {exc}"


@contextmanager
def failure_reported(reporter: Reporter) -> Iterator[None]:
    """Report an exception raised in the block as the run's failure, then let it propagate:
    the traceback goes to the run's log, `failure_detail` to its status."""
    try:
        yield
    except BaseException as exc:
        reporter.log(traceback.format_exc())
        reporter.status("failed", failure_detail(exc))
        raise


# --- reports that travel: a rank-0 process far from the studio sends them as plain dicts ---------------

REPORT_KINDS = ("metrics", "rollouts", "status", "checkpoint", "log", "warning", "prompt_stats")


class EventReporter:
    """A Reporter that turns every call into one JSON-safe dict and hands it to `send`: how rank 0 of a
    run launched in other processes (torchrun children, Ray workers) reports to the process that
    launched it, which `replay`s each event into its own reporter (the studio's database reporter).
    The ranks then need neither the database nor the studio's code."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.send({"kind": "metrics", "step": step, "values": dict(values)})

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self.send({"kind": "rollouts", "step": step, "rollouts": [r.to_dict() for r in rollouts]})

    def status(self, state: str, detail: str = "") -> None:
        self.send({"kind": "status", "state": state, "detail": detail})

    def checkpoint(self, step: int, path: str) -> None:
        self.send({"kind": "checkpoint", "step": step, "path": path})

    def log(self, line: str) -> None:
        self.send({"kind": "log", "line": line})

    def warning(self, step: int | None, message: str) -> None:
        self.send({"kind": "warning", "step": step, "message": message})

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        self.send({"kind": "prompt_stats", "step": step, "stats": [dict(s) for s in stats]})


def replay(event: dict[str, Any], reporter: Reporter) -> None:
    """Apply one `EventReporter` event to `reporter`. An event of an unknown kind raises ValueError:
    it comes from another process, so it is checked before it is believed."""
    kind = event.get("kind")
    if kind == "metrics":
        reporter.metrics(int(event["step"]), {str(k): float(v) for k, v in event["values"].items()})
    elif kind == "rollouts":
        reporter.rollouts(int(event["step"]), [Rollout.from_dict(r) for r in event["rollouts"]])
    elif kind == "status":
        reporter.status(str(event["state"]), str(event.get("detail", "")))
    elif kind == "checkpoint":
        reporter.checkpoint(int(event["step"]), str(event["path"]))
    elif kind == "log":
        reporter.log(str(event["line"]))
    elif kind == "warning":
        step = event.get("step")
        reporter.warning(None if step is None else int(step), str(event["message"]))
    elif kind == "prompt_stats":
        reporter.prompt_stats(int(event["step"]), [dict(s) for s in event["stats"]])
    else:
        raise ValueError(f"unknown report event kind {kind!r}; known: {', '.join(REPORT_KINDS)}")


@dataclass
class RunResult:
    """How a run ended, as `train` (trainers.run.loop, or trainers.scale.ray_cluster for rank 0 of a Ray job)
    returns it."""

    status: str  # "succeeded" | "cancelled" | "failed"
    steps: int  # optimiser steps completed (including those before a resume)
    metrics: dict[str, float] = field(default_factory=dict)  # the last step's
    checkpoint: str | None = None  # the last checkpoint written
    detail: str = ""


class NullReporter:
    """What ranks other than 0 report to: nothing (rank 0 speaks for the job)."""

    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def rollouts(self, step: int, rollouts: list[Any]) -> None: ...
    def status(self, state: str, detail: str = "") -> None: ...
    def checkpoint(self, step: int, path: str) -> None: ...
    def log(self, line: str) -> None: ...
    def warning(self, step: int | None, message: str) -> None: ...
    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None: ...


class JsonlReporter:
    """Writes `<prefix>metrics.jsonl` ({"step": N, key: value, ...} per line), `<prefix>rollouts.jsonl`
    (one Rollout per line), `<prefix>prompt_stats.jsonl` ({"step": N, "prompts": [...]} per step) and
    `<prefix>run.log` into `output_dir`, and drives a progress bar."""

    def __init__(self, output_dir: str | Path, *, total: int | None = None, prefix: str = "", progress: bool = True):
        from tqdm import tqdm

        self.dir = Path(output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._metrics = open(self.dir / f"{prefix}metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._rollouts = open(self.dir / f"{prefix}rollouts.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._log = open(self.dir / f"{prefix}run.log", "a", encoding="utf-8")  # noqa: SIM115
        self._prompt_stats = open(self.dir / f"{prefix}prompt_stats.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.bar = tqdm(total=total, unit="step", disable=not progress or total is None, dynamic_ncols=True)
        self.final_state: str | None = None

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self._metrics.write(json.dumps({"step": step, **values}) + "\n")
        self._metrics.flush()
        if "reward/mean" in values:
            self.bar.n = step
            self.bar.set_postfix(reward=f"{values['reward/mean']:.3f}", refresh=False)
            self.bar.refresh()

    def rollouts(self, step: int, rollouts: list[Rollout]) -> None:
        self._rollouts.writelines(json.dumps(r.to_dict()) + "\n" for r in rollouts)
        self._rollouts.flush()

    def status(self, state: str, detail: str = "") -> None:
        self.final_state = state
        self.log(f"status: {state}" + (f" ({detail})" if detail else ""))

    def checkpoint(self, step: int, path: str) -> None:
        self.log(f"checkpoint at step {step}: {path}")

    def prompt_stats(self, step: int, stats: list[dict[str, Any]]) -> None:
        self._prompt_stats.write(json.dumps({"step": step, "prompts": stats}) + "\n")
        self._prompt_stats.flush()

    def warning(self, step: int | None, message: str) -> None:
        self.log(f"warning{f' at step {step}' if step is not None else ''}: {message}")

    def log(self, line: str) -> None:
        self._log.write(line.rstrip("\n") + "\n")
        self._log.flush()
        self.bar.write(line.rstrip("\n"), file=sys.stderr)

    def close(self) -> None:
        self.bar.close()
        for f in (self._metrics, self._rollouts, self._prompt_stats, self._log):
            f.close()
