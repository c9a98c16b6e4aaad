"""A stream that flows keeps its model server warm (studio.serving.proxy.stamped): last_used is
stamped while events pass, at most every touch_every_s(), so the worker's idle stop
(workers.serving.task._watch: last_used older than SERVING_IDLE_S) does not cut a long stream.

The real database; the clock is a stand-in so the test needs no minutes of waiting."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from studio.serving import proxy
from studio.serving.models import READY, ModelServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _consume(server_id: int, clock: Clock, gaps: list[float]) -> list[tuple[int, object]]:
    """Relay len(gaps) events, `gaps[i]` seconds of clock before each; last_used as each is yielded."""

    async def events():
        for i, gap in enumerate(gaps):
            clock.now += gap
            yield i

    async def main():
        seen = []
        async for event in proxy.stamped(events(), server_id):
            seen.append(
                (event, await ModelServer.objects.filter(pk=server_id).values_list("last_used", flat=True).aget())
            )
        return seen

    return asyncio.run(main())


@pytest.mark.django_db(transaction=True)  # sync_to_async writes from its own thread: its own connection
def test_a_long_stream_stamps_last_used_while_it_flows_but_not_at_every_event(settings):
    settings.SERVING_IDLE_S = 60.0
    old = timezone.now() - timedelta(seconds=50)  # near the idle stop already
    server = ModelServer.objects.create(ref="run-1/base", model_path="m", state=READY, last_used=old)
    clock = Clock()
    with mock.patch.object(proxy.time, "monotonic", clock):
        seen = _consume(server.pk, clock, [1.0, 1.0, proxy.TOUCH_EVERY_S, 1.0])
    stamps = [stamp for _, stamp in seen]
    assert [event for event, _ in seen] == [0, 1, 2, 3]
    assert stamps[0] == stamps[1] == old  # the first seconds: no write per event
    assert stamps[2] > old + timedelta(seconds=40)  # stamped mid-stream, once TOUCH_EVERY_S had passed
    assert stamps[3] == stamps[2]


def test_the_stamp_interval_stays_well_inside_a_short_idle_time(settings):
    settings.SERVING_IDLE_S = 8.0
    assert proxy.touch_every_s() == 2.0
    settings.SERVING_IDLE_S = 600.0
    assert proxy.touch_every_s() == proxy.TOUCH_EVERY_S
