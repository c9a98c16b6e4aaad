"""Rows the run tests write directly: metric points and rollouts."""

from __future__ import annotations

from studio.runs import prompts
from studio.runs.models import MetricPoint, Rollout, RunPrompt


def add_points(run, key, values, start_step=0, t0=1_700_000_000.0) -> None:
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=start_step + i, key=key, value=v, wall_time=t0 + 2.0 * (start_step + i))
        for i, v in enumerate(values)
    )


def prompt_of(run, content="What is 6*7?") -> RunPrompt:
    """The run's prompt row of `content`, made once however often it is asked for, as the worker does."""
    return prompts.upsert(run.pk, [content])[0]


def make_rollout(
    for_run, step=0, prompt_id="p0", sample_index=0, reward=1.0, completion="42", prompt="What is 6*7?"
) -> Rollout:
    return Rollout.objects.create(
        run=for_run,
        step=step,
        prompt_id=prompt_id,
        sample_index=sample_index,
        run_prompt=prompt_of(for_run, prompt),
        completion=completion,
        preview=completion[:200],
        reward=reward,
        scores={"correct": {"score": reward, "explanation": "", "error": None}},
    )
