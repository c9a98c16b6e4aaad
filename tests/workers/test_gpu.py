import shutil

import pytest
import torch

from studio.fleet.gpus import detect_gpus
from studio.fleet.models import WorkerNode
from workers.gpu import Heartbeat, beat, gpu_slots, pin_to_gpu, record_start, release_gpu_memory


def test_pool_processes_are_spread_over_the_visible_gpus():
    slots = gpu_slots({"CUDA_VISIBLE_DEVICES": "2,3"})
    assert slots == ["2", "3"]
    envs = [{} for _ in range(3)]
    assert [pin_to_gpu(i, slots, env) for i, env in enumerate(envs)] == ["2", "3", "2"]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == ["2", "3", "2"]


def test_gpu_uuids_are_kept_as_given():
    assert gpu_slots({"CUDA_VISIBLE_DEVICES": "GPU-aaa, GPU-bbb"}) == ["GPU-aaa", "GPU-bbb"]


def test_without_gpus_a_process_is_left_unpinned():
    env = {}
    assert pin_to_gpu(0, [], env) is None
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_releasing_gpu_memory_is_safe_without_a_gpu():
    release_gpu_memory()  # must not raise on a CPU-only machine or before CUDA is used


@pytest.mark.django_db
def test_a_started_worker_appears_in_the_fleet_and_beats_keep_it_fresh():
    record_start("gpu@test-host", ["gpu"], concurrency=1)
    node = WorkerNode.objects.get(hostname="gpu@test-host")
    assert node.is_online and node.queues == ["gpu"]
    assert node.gpus == detect_gpus()  # [] here; the real GPUs on a GPU machine
    first_seen = node.last_seen
    beat("gpu@test-host", ["gpu"], 1)
    node.refresh_from_db()
    assert node.last_seen > first_seen


@pytest.mark.django_db
def test_a_beat_recreates_a_deleted_row():
    beat("gpu@test-host", ["gpu"], 2)
    assert WorkerNode.objects.get(hostname="gpu@test-host").concurrency == 2


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_beats_until_stopped():
    record_start("gpu@test-host", ["gpu"], concurrency=1)
    before = WorkerNode.objects.get().last_seen
    heartbeat = Heartbeat("gpu@test-host", ["gpu"], 1, interval=0.05)
    heartbeat.start()
    try:
        for _ in range(100):
            if WorkerNode.objects.get().last_seen > before:
                break
            heartbeat.stopped.wait(0.05)
    finally:
        heartbeat.stop()
        heartbeat.join(5)
    assert WorkerNode.objects.get().last_seen > before
    assert not heartbeat.is_alive()


@pytest.mark.gpu
@pytest.mark.skipif(
    not (torch.cuda.is_available() and shutil.which("nvidia-smi")), reason="needs a CUDA GPU and nvidia-smi; none here"
)
def test_nvidia_smi_and_torch_agree_on_the_gpus():
    gpus = detect_gpus()
    assert len(gpus) == torch.cuda.device_count()
    assert gpus[0]["name"] == torch.cuda.get_device_name(0)
    assert gpus[0]["memory_total_gb"] == pytest.approx(
        torch.cuda.get_device_properties(0).total_memory / 2**30, abs=0.2
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; none here")
def test_released_memory_goes_back_to_the_driver():
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    del block
    assert torch.cuda.memory_reserved() >= 256 * 2**20  # still cached by torch's allocator
    release_gpu_memory()
    assert torch.cuda.memory_reserved() < 256 * 2**20
