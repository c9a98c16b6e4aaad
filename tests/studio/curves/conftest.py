"""The run the curves tests read; the named users come from tests/studio/conftest.py."""

import pytest

from studio.runs.models import MetricPoint, Run


@pytest.fixture
def run(team, alice):
    return Run.objects.create(team=team, name="grpo-tiny", spec={}, created_by=alice, total_steps=100, last_seq=7)


def add_points(run, key, values, start_step=0, t0=1_700_000_000.0):
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=start_step + i, key=key, value=v, wall_time=t0 + 2.0 * (start_step + i))
        for i, v in enumerate(values)
    )
