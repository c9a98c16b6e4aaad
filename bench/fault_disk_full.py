"""Fault: the disk fills while a real run writes a checkpoint.

A studio on a database of its own in the local PostgreSQL and its own Redis database, the demo
bootstrapped as `up` makes it (the tiny model), one Celery run worker; the runs' folder
(STUDIO_DATA_DIR/runs, where each run's checkpoints go) is a tmpfs of --size-mb (the bench mounts it:
run as root). The run checkpoints every --every steps. Once its first checkpoint is stored, the bench
fills the tmpfs with a file until less than half a checkpoint is free, so the next checkpoint runs out
of space part-way. Printed: how the run ended and what it says (state, error), whether the previous
checkpoint is intact (every file's sha256 before and after, the trainer still lists it as complete,
its state loads), what the failed write left behind (the `.tmp` folder and its size), and then, with
the filler removed, a resume from the previous checkpoint running to the end.

    python bench/fault_disk_full.py                   # 30 steps, a checkpoint every 10, a 128 MiB tmpfs
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import studio_stack as stack  # noqa: E402 - bench/ is the script's folder, first on the path

DB_NAME = "studio_bench_fault_disk"
REDIS_DB = 11  # not 15: the suite's team-scale pass uses that one


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> int:
    """A file in `path` that leaves `leave` bytes free; its size."""
    filler = path / "filler.bin"
    size = max(0, free_bytes(path) - leave)
    with filler.open("wb") as out:
        chunk = b"\0" * (1 << 20)
        written = 0
        while written < size:
            written += out.write(chunk[: min(len(chunk), size - written)])
    return size


def wait_end(run_id: int, timeout: float) -> dict:
    return stack.until(f"run {run_id} ends", lambda: (r := stack.run_row(run_id))["state"] not in ("queued", "running")
                       and r, timeout=timeout)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--size-mb", type=int, default=128)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="studio-fault-disk-"))
    runs_dir = data_dir / "runs"
    runs_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size_mb}M", "tmpfs", str(runs_dir)], check=True)
    worker = None
    try:
        env = stack.studio_env(stack.fresh_database(DB_NAME), stack.clean_redis(REDIS_DB), data_dir,
                               STUDIO_ADMIN_PASSWORD="bench-password-123")  # fmt: skip
        experiment, user = stack.demo_studio(env)
        worker = stack.start_worker(env, "disk@%h", data_dir / "worker.log")
        from studio.experiments.services import launch
        from studio.runs import lifecycle
        from studio.runs.models import Checkpoint, Run
        from trainers.run.checkpoint import STATE_FILE, list_checkpoints

        run = launch(experiment, user, name="disk fills", overrides=stack.quick_demo(args.steps, args.every))
        first = stack.until("the first checkpoint stored", lambda: Checkpoint.objects.filter(run=run).first(), 300)
        folder = Path(first.path)
        before = digests(folder)
        checkpoint_bytes = size_of(folder)
        filled = fill(runs_dir, leave=checkpoint_bytes // 2)
        print(f"run {run.pk}: checkpoint step-{first.step} stored ({checkpoint_bytes / 2**20:.1f} MiB, "
              f"{len(before)} files); filled the {args.size_mb} MiB tmpfs with {filled / 2**20:.1f} MiB, "
              f"{free_bytes(runs_dir) / 2**20:.1f} MiB left", flush=True)  # fmt: skip
        t0 = time.monotonic()
        ended = wait_end(run.pk, 600)
        print(f"  the run ended {ended['state']} at step {ended['last_step']} "
              f"({time.monotonic() - t0:.1f} s after the fill)", flush=True)  # fmt: skip
        error_lines = [line for line in (ended["error"] or "").splitlines() if line.strip()]
        print("  its error, first lines:\n    " + "\n    ".join(error_lines[:4]), flush=True)
        after = digests(folder) if folder.exists() else {}
        root = folder.parent
        left = sorted(p.name for p in root.iterdir())
        partial = [p for p in root.iterdir() if p.name.endswith(".tmp")]
        complete = [p.name for p in list_checkpoints(root.parent)]
        import torch

        state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False) if folder.exists() else {}
        intact = after == before and folder.name in complete and state.get("step") == first.step
        stored = list(Checkpoint.objects.filter(run=run).order_by("step").values_list("step", flat=True))
        print(f"  previous checkpoint {folder.name}: {'INTACT' if intact else 'DAMAGED'} ({sum(after.get(k) == v for k, v in before.items())}"
              f"/{len(before)} files unchanged; complete checkpoints the trainer lists: {complete}; its state says "
              f"step {state.get('step')}); the studio's checkpoint rows: steps {stored}")  # fmt: skip
        print(f"  left in {root}: {left}; partial folders: "
              f"{[(p.name, round(size_of(p) / 2**20, 1)) for p in partial]} MiB; free now "
              f"{free_bytes(runs_dir) / 2**20:.1f} MiB", flush=True)  # fmt: skip
        says_disk = any(
            "No space left on device" in line or "disk that holds the run's folder is full" in line
            for line in error_lines
        )
        says_checkpoint = "checkpoint" in (ended["error"] or "").lower()
        print(
            f"  the run says the disk was full: {says_disk}; names the checkpoint: {says_checkpoint}; automatic "
            f"restarts: {Run.objects.get(pk=run.pk).restarts}"
        )

        (runs_dir / "filler.bin").unlink()
        resumed = lifecycle.resume(Run.objects.get(pk=run.pk), user)
        done = wait_end(resumed.pk, 600)
        print(f"  with the filler removed, resumed as run {resumed.pk} from step {resumed.resumed_at_step}: "
              f"{done['state']} at step {done['last_step']}", flush=True)  # fmt: skip
        print(f"\ndisk full during a checkpoint ({args.size_mb} MiB tmpfs, checkpoint {checkpoint_bytes / 2**20:.1f} "
              f"MiB): run {ended['state']} at step {ended['last_step']}; previous checkpoint "
              f"{'intact' if intact else 'DAMAGED'}; partial {[p.name for p in partial]} left behind; error says the disk is full "
              f"{says_disk}, names the checkpoint {says_checkpoint}; resume from step {resumed.resumed_at_step}: "
              f"{done['state']}; load average {stack.load_average()}; logs in {data_dir}")  # fmt: skip
    finally:
        if worker is not None:
            stack.stop(worker, grace=30)
        subprocess.run(["umount", str(runs_dir)], check=False)


if __name__ == "__main__":
    main()
