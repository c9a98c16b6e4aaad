"""The run of the curves tests and a rollout in it; the named users come from tests/studio/conftest.py."""

import pytest

from studio.runs.models import Rollout
from tests.studio.curves.conftest import run  # noqa: F401


@pytest.fixture
def rollout(run):  # noqa: F811 (the imported fixture, requested by name)
    return make_rollout(run, step=3, sample_index=0)


def make_rollout(for_run, step=0, prompt_id="p0", sample_index=0, reward=1.0, completion="42"):
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
