"""A package's own virtual environment: `<ROLLOUT_ENV_PACKAGES_DIR>/<name>-<version>/`.

verifiers 0.4 brings dozens of pinned dependencies (openai, datasets, mcp, prime-*...) that must
not move the studio's or vLLM's, so each environment package gets a virtual environment of its own,
made by the worker (never the web process) with the interpreter the worker runs (`python -m venv`
from a virtual environment makes one on the same base interpreter, which the sandbox then binds
read-only). The studio's environment never sees these packages; their code only ever runs in the
sandbox, with that environment's python (trainers.sandbox.process, `python=`).

What the operator decides, from the worker's environment (settings import no runtime code, so
these are plain variables the workers' start-up sets):

- `ROLLOUT_ENV_PACKAGES_DIR`: where the environments go (the workers: the studio's data folder,
  `envs/`, hidden from every sandbox but each package's own folder);
- `ROLLOUT_ENV_PIP_INDEX`: the package index URL(s), space-separated (the first is pip's
  --index-url, the others --extra-index-url); empty: pip's own configuration (PyPI);
- `ROLLOUT_ENV_PIP_FIND_LINKS`: folders or pages of wheels pip may also take packages from;
- `ROLLOUT_ENV_PACKAGES_ALLOWED`: the package names that may be installed, comma-separated;
  empty: any name.

Only wheels are installed (`--only-binary :all:`): a source distribution would run its build
script on the worker, outside any sandbox. An install that fails leaves nothing behind and raises
`PackageInstallError` with pip's last lines; a finished one is a folder renamed into place (so a
half-made environment is never used) with `installed.json` recording what it holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from trainers.rollout.environments.catalog import VERIFIERS_VERSION

DIR_ENV = "ROLLOUT_ENV_PACKAGES_DIR"
INDEX_ENV = "ROLLOUT_ENV_PIP_INDEX"
FIND_LINKS_ENV = "ROLLOUT_ENV_PIP_FIND_LINKS"
ALLOWED_ENV = "ROLLOUT_ENV_PACKAGES_ALLOWED"
INSTALL_TIMEOUT_S = 1800
PIP_TAIL_LINES = 12  # of pip's output, said when an install fails
RECORD = "installed.json"


class PackageInstallError(RuntimeError):
    """A package could not be installed; the message says why in words (pip's last lines)."""


@dataclass(frozen=True)
class InstalledPackage:
    """A ready environment: its folder and python, and the versions installed (from its record)."""

    folder: Path
    name: str
    version: str
    verifiers: str
    install_s: float

    @property
    def python(self) -> str:
        return str(self.folder / "bin" / "python")

    def provenance(self) -> dict[str, object]:
        return {"package": self.name, "version": self.version, "verifiers": self.verifiers}


def packages_dir() -> Path:
    raw = os.environ.get(DIR_ENV, "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "rollout-studio" / "envs"


def allowed_names() -> set[str]:
    return {canonical(n) for n in os.environ.get(ALLOWED_ENV, "").split(",") if n.strip()}


def canonical(name: str) -> str:
    """PEP 503's normal form: case and runs of -_. do not tell names apart."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def folder_for(name: str, version: str) -> Path:
    return packages_dir() / f"{canonical(name)}-{version}"


def installed(name: str, version: str) -> InstalledPackage | None:
    """The package's environment when it is complete (its record is written last), else None."""
    folder = folder_for(name, version)
    try:
        record = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return InstalledPackage(folder, record["package"], record["version"], record["verifiers"], record["install_s"])


def ensure_installed(name: str, version: str, log=lambda line: None) -> InstalledPackage:
    """The package's environment, installed first when missing (one installer at a time per package:
    a second run waits for the first's). `log(line)` hears what is happening."""
    if canonical(name) == "verifiers":
        raise PackageInstallError("name the environment's package, not verifiers itself (it comes with it)")
    allowed = allowed_names()
    if allowed and canonical(name) not in allowed:
        raise PackageInstallError(
            f"the package {name!r} is not on the operator's list of environment packages ({ALLOWED_ENV}: "
            f"{', '.join(sorted(allowed))})"
        )
    if (ready := installed(name, version)) is not None:
        return ready
    root = packages_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{canonical(name)}-{version}.lock"):
        if (ready := installed(name, version)) is not None:  # another run installed it meanwhile
            return ready
        return _install(name, version, log)


def _install(name: str, version: str, log) -> InstalledPackage:
    final = folder_for(name, version)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(final, ignore_errors=True)  # a folder without its record is an install that died
    started = time.monotonic()
    log(f"installing {name}=={version} with verifiers=={VERIFIERS_VERSION} into a virtual environment of its own")
    try:
        _run([sys.executable, "-m", "venv", str(partial)], "making the virtual environment")
        _run(
            [str(partial / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
             "--no-input", "--only-binary", ":all:", *_index_args(),
             f"{name}=={version}", f"verifiers=={VERIFIERS_VERSION}"],
            f"pip could not install {name}=={version}",
        )  # fmt: skip
        seconds = round(time.monotonic() - started, 1)
        record = {"package": name, "version": version, "verifiers": VERIFIERS_VERSION, "install_s": seconds}
        (partial / RECORD).write_text(json.dumps(record))
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    log(f"installed {name}=={version} in {seconds:g} s")
    ready = installed(name, version)
    assert ready is not None
    return ready


def _index_args() -> list[str]:
    args: list[str] = []
    urls = os.environ.get(INDEX_ENV, "").split()
    if urls:
        args += ["--index-url", urls[0]]
        for url in urls[1:]:
            args += ["--extra-index-url", url]
    for link in os.environ.get(FIND_LINKS_ENV, "").split():
        args += ["--find-links", link]
    return args


def _run(command: list[str], what: str) -> None:
    """Run an install step; `PackageInstallError(what: pip's last lines)` when it fails."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise PackageInstallError(f"{what}: it took longer than {INSTALL_TIMEOUT_S} s") from None
    except OSError as exc:
        raise PackageInstallError(f"{what}: {exc}") from None
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if _worth_saying(line)]
        raise PackageInstallError(f"{what}:\n" + "\n".join(lines[-PIP_TAIL_LINES:]))


def _worth_saying(line: str) -> bool:
    # pip warns about every index location it cannot read; the error lines are what tells why.
    return bool(line.strip()) and not line.startswith("WARNING: Location")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
