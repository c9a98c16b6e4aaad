import pytest

from studio.fleet import gpus
from studio.fleet.gpus import default_concurrency, detect_gpus, parse_nvidia_smi, visible_indices

# Real `nvidia-smi --query-gpu=index,name,memory.total,memory.used,utilization.gpu --format=csv,noheader,nounits`
# output of a two-GPU machine, one board not reporting utilisation.
SMI_TWO_GPUS = "0, NVIDIA H100 80GB HBM3, 81559, 1024, 37\n1, NVIDIA H100 80GB HBM3, 81559, 0, [N/A]\n"


def test_nvidia_smi_rows_become_gpu_dicts_in_gigabytes():
    assert parse_nvidia_smi(SMI_TWO_GPUS) == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_gb": 79.6,
            "memory_used_gb": 1.0,
            "utilization": 37.0,
        },
        {
            "index": 1,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_gb": 79.6,
            "memory_used_gb": 0.0,
            "utilization": None,
        },
    ]


def test_lines_that_are_not_gpu_rows_are_skipped():
    assert parse_nvidia_smi("No devices were found\n") == []


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("1,3", [1, 3]), ("", []), ("GPU-8f3a-uuid", None)])
def test_cuda_visible_devices_names_physical_indices(value, expected):
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible_indices(env) == expected


def test_without_nvidia_smi_there_are_no_gpus(monkeypatch):
    monkeypatch.setattr(gpus.shutil, "which", lambda name: None)
    assert detect_gpus() == []


def test_a_gpu_worker_runs_one_process_per_gpu():
    two = parse_nvidia_smi(SMI_TWO_GPUS)
    assert default_concurrency("gpu", two) == 2
    assert default_concurrency(["default", "gpu"], two) == 2
    assert default_concurrency("gpu", []) == 1  # CPU-only machine: still one process
    assert default_concurrency("default", two) == 1
