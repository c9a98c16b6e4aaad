from datetime import timedelta

import pytest
from django.utils import timezone

from studio.fleet.models import WorkerNode

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_gb": 79.6, "memory_used_gb": 0.5, "utilization": 0}

pytestmark = pytest.mark.django_db


def test_a_started_worker_is_online_with_its_gpus():
    node = WorkerNode.record_start("gpu@host-1", ["gpu"], [H100, {**H100, "index": 1}], concurrency=2)
    assert node.is_online
    assert (node.gpu_count, node.gpu_memory_total_gb, node.concurrency) == (2, 159.2, 2)
    assert list(WorkerNode.objects.online()) == [node]


def test_a_worker_that_missed_three_beats_is_offline(settings):
    settings.HEARTBEAT_INTERVAL_S = 10
    node = WorkerNode.record_start("gpu@host-1", ["gpu"], [H100], concurrency=1)
    WorkerNode.objects.filter(pk=node.pk).update(last_seen=timezone.now() - timedelta(seconds=31))
    node.refresh_from_db()
    assert not node.is_online
    assert not WorkerNode.objects.online().exists()


def test_a_beat_brings_it_back_and_updates_gpu_readings():
    node = WorkerNode.record_start("gpu@host-1", ["gpu"], [H100], concurrency=1)
    WorkerNode.objects.filter(pk=node.pk).update(last_seen=timezone.now() - timedelta(hours=1))
    assert WorkerNode.record_beat("gpu@host-1", [{**H100, "memory_used_gb": 60.0}])
    node.refresh_from_db()
    assert node.is_online
    assert node.gpus[0]["memory_used_gb"] == 60.0


def test_a_beat_from_an_unknown_worker_says_so():
    assert WorkerNode.record_beat("gpu@nowhere") is False


def test_a_cleanly_stopped_worker_is_offline_at_once():
    WorkerNode.record_start("gpu@host-1", ["gpu"], [H100], concurrency=1)
    WorkerNode.record_stop("gpu@host-1")
    assert not WorkerNode.objects.get(hostname="gpu@host-1").is_online


def test_a_restart_reuses_the_row_and_clears_the_stop():
    WorkerNode.record_start("gpu@host-1", ["gpu"], [H100], concurrency=1)
    WorkerNode.record_stop("gpu@host-1")
    WorkerNode.record_start("gpu@host-1", ["gpu", "default"], [], concurrency=1)
    node = WorkerNode.objects.get()
    assert node.is_online and node.queues == ["gpu", "default"] and node.gpus == []
