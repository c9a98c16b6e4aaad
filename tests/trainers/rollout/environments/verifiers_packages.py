"""Small verifiers 0.4 tasksets written against the real library, packed as one wheel
(`rollout-test-tasksets`), and the virtual environment the verifiers kind installs them into.

Installing verifiers 0.4.0 and its dependencies takes minutes on a cold pip cache (6 min here, 1-2
with the wheels cached), so the environment is made once and kept under the system's temporary
folder, keyed by the wheel's content: later test sessions (and CI on the same machine) reuse it. It is
installed the way a worker installs a package: `venvs.ensure_installed`, from an index (the operator's)
plus this wheel's folder (ROLLOUT_ENV_PIP_FIND_LINKS), wheels only.
"""

import base64
import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

NAME, VERSION = "rollout-test-tasksets", "1.0"

# Single turn: say the task's digit. Two rewards with weights and a metric, async as 0.4 wants them.
ECHO = """
import verifiers.v1 as vf


class EchoData(vf.TaskData):
    answer: str


class EchoConfig(vf.TasksetConfig):
    rows: int = 4


class EchoTask(vf.Task[EchoData]):
    @vf.reward(weight=1.0)
    async def says_digit(self, task, trace) -> float:
        return float(task.answer in trace.last_reply)

    @vf.reward(weight=0.5)
    async def brief(self, trace) -> float:
        return 1.0 if len(trace.last_reply) <= 8 else 0.0

    @vf.metric
    async def reply_chars(self, trace) -> float:
        return float(len(trace.last_reply))


class EchoTaskset(vf.Taskset[EchoTask, EchoConfig]):
    def load(self):
        for i in range(self.config.rows):
            yield EchoTask(EchoData(prompt=f"Say the digit {i % 10}.", answer=str(i % 10),
                                    system_prompt="Answer with the digit only."))


__all__ = ["EchoTaskset"]
"""

# Misbehaving: the reply names what the reward does ("reads:/etc/passwd", "loops"...); its second task's
# prompt is 5 MB.
HOSTILE = """
import os
import verifiers.v1 as vf


class HostileTask(vf.Task[vf.TaskData]):
    @vf.reward
    async def misbehaves(self, trace) -> float:
        what, _, arg = trace.last_reply.partition(":")
        if what == "reads":
            return float(len(open(arg).read()))
        if what == "lists":
            return float(len(os.listdir(arg)))
        if what == "loops":
            while True:
                pass
        if what == "allocates":
            big = bytearray(8 * 1024 ** 3)
        if what == "network":
            import socket
            socket.create_connection(("1.1.1.1", 53), timeout=1)
        if what == "exits":
            os._exit(3)
        if what == "nan":
            return float("nan")
        return 1.0


class HostileTaskset(vf.Taskset[HostileTask, vf.TasksetConfig]):
    def load(self):
        yield HostileTask(vf.TaskData(prompt="Say hi."))
        yield HostileTask(vf.TaskData(prompt="x" * 5_000_000))


__all__ = ["HostileTaskset"]
"""

# verifiers 0.4's multi-agent kind of environment: its own Env, whose agents call models themselves.
AGENTS = """
import verifiers.v1 as vf


class TalkEnv(vf.Env):
    async def run(self, task, agents):
        return None


class TalkTaskset(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def load(self):
        yield vf.Task(vf.TaskData(prompt="Talk."))


__all__ = ["TalkEnv", "TalkTaskset"]
"""

MODULES = {"tiny_echo": ECHO, "hostile_tasks": HOSTILE, "agent_talk": AGENTS}


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(folder: Path) -> Path:
    """The tasksets as a pure-Python wheel requiring verifiers==0.4.0 (written by hand: no build backend)."""
    dist = f"{NAME.replace('-', '_')}-{VERSION}.dist-info"
    files = {f"{module}/__init__.py": source.encode() for module, source in MODULES.items()}
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nRequires-Dist: verifiers==0.4.0\n"
    ).encode()
    files[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: rollout-studio-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{NAME.replace('-', '_')}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in sorted(files.items()):
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return wheel


def shared_root() -> Path:
    """Kept across test sessions: `<tmp>/rollout-studio-test-envs/verifiers-0.4.0/` (wheels/, envs/). When the
    tasksets above change, only the wheel is installed again (`install`), not verifiers."""
    return Path(tempfile.gettempdir()) / "rollout-studio-test-envs" / "verifiers-0.4.0"


def environment_variables(root: Path) -> dict[str, str]:
    return {
        "ROLLOUT_ENV_PACKAGES_DIR": str(root / "envs"),
        "ROLLOUT_ENV_PIP_FIND_LINKS": str(root / "wheels"),
        "ROLLOUT_ENV_PACKAGES_ALLOWED": "",
    }


def install(root: Path):
    """The test tasksets' virtual environment, installed as a worker installs it (reused when there)."""
    from trainers.rollout.environments.packages.venvs import ensure_installed

    wheel = build_wheel(root / "wheels")
    saved = {k: os.environ.get(k) for k in environment_variables(root)}
    os.environ.update(environment_variables(root))
    try:
        package = ensure_installed(NAME, VERSION)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    site = next(package.folder.glob("lib/python*/site-packages"))
    if any(_read(site / module / "__init__.py") != source for module, source in MODULES.items()):
        # The tasksets changed since the environment was made: this wheel again, its dependencies kept.
        subprocess.run([package.python, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index",
                        "-q", str(wheel)], check=True, capture_output=True)  # fmt: skip
    return package


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
