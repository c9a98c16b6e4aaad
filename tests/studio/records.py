"""Rows the run tests write directly: metric points and rollouts."""

from __future__ import annotations

from studio.runs.models import MetricPoint, Rollout


def add_points(run, key, values, start_step=0, t0=1_700_000_000.0) -> None:
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=start_step + i, key=key, value=v, wall_time=t0 + 2.0 * (start_step + i))
        for i, v in enumerate(values)
    )


def make_rollout(for_run, step=0, prompt_id="p0", sample_index=0, reward=1.0, completion="42") -> Rollout:
    return Rollout.objects.create(
        run=for_run,
        step=step,
        prompt_id=prompt_id,
        sample_index=sample_index,
        prompt="What is 6*7?",
        completion=completion,
        preview=completion[:200],
        reward=reward,
        scores={"correct": {"score": reward, "explanation": "", "error": None}},
    )
