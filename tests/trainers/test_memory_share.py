"""A run on a share of a GPU (trainers.scale.memory_share): the part read from the environment, vLLM's memory
setting scaled by it, and the process's CUDA allocator capped at it. The cap itself needs a CUDA device: that
test runs where one is and is skipped here, with the reason."""

from __future__ import annotations

import os

import pytest
import torch

from tests.trainers.rollout.engines.test_vllm_engine import make_spec
from trainers.rollout.engines.vllm_engine import engine_kwargs
from trainers.scale import memory_share
from trainers.scale.memory_share import MEMORY_SHARE_ENV


def test_the_part_is_read_from_the_environment_and_a_bad_one_is_refused():
    assert memory_share.current({}) is None
    assert memory_share.current({MEMORY_SHARE_ENV: "0.25"}) == 0.25
    assert memory_share.current({MEMORY_SHARE_ENV: "1"}) is None  # the whole GPU
    for bad in ("quarter", "0", "1.5", "-0.2"):
        with pytest.raises(ValueError, match=MEMORY_SHARE_ENV):
            memory_share.current({MEMORY_SHARE_ENV: bad})


def test_vllm_is_given_its_setting_of_the_share_not_of_the_device(tmp_path, monkeypatch):
    spec = make_spec(tmp_path, vllm_gpu_memory_utilization=0.4)
    assert engine_kwargs(spec)["gpu_memory_utilization"] == 0.4
    monkeypatch.setenv(MEMORY_SHARE_ENV, "0.25")
    assert engine_kwargs(spec)["gpu_memory_utilization"] == 0.1
    assert engine_kwargs(spec, on_gpu=False)["gpu_memory_utilization"] == 0.4  # the CPU build sizes host memory


def test_the_share_is_set_while_the_run_runs_and_put_back_after():
    assert MEMORY_SHARE_ENV not in os.environ
    with memory_share.share(0.5):
        assert memory_share.current() == 0.5
    assert MEMORY_SHARE_ENV not in os.environ
    with memory_share.share(None):  # a whole GPU: nothing changes
        assert memory_share.current() is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the allocator cap is CUDA's; this machine has no GPU")
def test_an_allocation_past_the_share_fails_in_this_process_and_fits_again_after():
    total = torch.cuda.get_device_properties(0).total_memory
    with memory_share.share(0.25):
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(int(total * 0.3), dtype=torch.uint8, device="cuda")
        fits = torch.empty(int(total * 0.2), dtype=torch.uint8, device="cuda")
        del fits
    torch.cuda.empty_cache()
    again = torch.empty(int(total * 0.3), dtype=torch.uint8, device="cuda")  # the cap is lifted with the share
    del again
    torch.cuda.empty_cache()
