"""What a run's recorded usage (studio.runs.usage) must agree with: the run's own timings and metrics, as the
end-to-end tests read them from a real worker's run (tests/workers/test_process_group_runs.py through the
worker's SQLite file, tests/studio/test_end_to_end.py through the API). Plain values in, so both can use it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

# The meter's clock starts when the worker claims the run (lifecycle.start stamps `started` in that
# transaction) and stops right before lifecycle.finish stamps `finished`: the two spans differ by the
# database writes between them, well under this on a loaded 2-core machine.
SPAN_SLACK_S = 3.0


def check_usage(usage: dict[str, Any], *, started: str, finished: str, processes: int,
                step_metrics: list[dict[str, float]], rollout_tokens: int) -> dict[str, float]:  # fmt: skip
    """Assert that a finished CPU run's `usage` agrees with its started/finished times, its `processes` (its
    placement), the metrics of each step and the tokens of its training rollouts (Rollout.num_tokens summed).
    `usage`: the totals (`device_seconds`, `gpu_seconds`, `tokens_generated`, `tokens_trained`) with either
    Run.usage's `attempts` (the worker's database: each process's seconds) or the API's (`attempts`: a count,
    `final`). Returns the numbers compared, for a report."""
    span = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    if isinstance(usage["attempts"], dict):
        [attempt] = usage["attempts"].values()
        assert attempt["final"] is True
        procs = attempt["processes"]
        assert [p["rank"] for p in procs] == list(range(processes)) and {p["device"] for p in procs} == {"cpu"}
        seconds = procs[0]["seconds"]
        assert all(p["seconds"] == seconds for p in procs)  # one clock for the run's processes, on the worker
        assert usage["device_seconds"] == sum(p["seconds"] for p in procs)
    else:
        assert (usage["attempts"], usage["final"]) == (1, True)
        seconds = usage["device_seconds"] / processes
    assert abs(seconds - span) < SPAN_SLACK_S, (seconds, span)
    steps_s = sum(m["timing/step_s"] for m in step_metrics)
    assert steps_s < seconds  # the steps ran inside the processes' time (model loading and checkpoints too)
    assert usage["gpu_seconds"] == 0.0
    generated = sum(m["tokens/generated"] for m in step_metrics)
    assert usage["tokens_generated"] == generated == rollout_tokens > 0  # every process's rollouts are reported
    trained = sum(m["tokens/trained"] for m in step_metrics)
    assert usage["tokens_trained"] == trained > generated  # prompt + completion of each trained sequence
    return {"seconds": seconds, "span": span, "steps_s": steps_s, "device_seconds": usage["device_seconds"],
            "tokens_generated": generated, "tokens_trained": trained}  # fmt: skip
