"""Fault: a worker that hangs (SIGSTOP: alive, holding its run, doing nothing) while a real run trains.

A studio on a database of its own in the local PostgreSQL and its own Redis database, the demo
bootstrapped as `up` makes it (the tiny model), two Celery run workers started with the launcher's
command line (`hang-a`, `hang-b`, one pool process each), the heartbeat turned down to
--beat-s / --timeout-s so the bench takes a minute, not several. Two cases, one run each:

1. the whole worker stopped (`kill -STOP` to its process group: main process and pool, as a VM
   paused or a container frozen): the run's heartbeat stops, the other worker's fleet heartbeat
   (workers.gpu) sweeps it as lost, it restarts from its newest checkpoint and the other worker runs it;
2. only the pool process running the run stopped (the worker's main process still answers Celery and
   stamps the fleet row): the same should happen, and the restarted run must not wait behind the
   stopped process.

3. the whole worker stopped, and a process of the studio stopped half-way through a report's
   transaction on the run's row (after the UPDATE that every report makes, before its COMMIT): a worker
   hung at that moment keeps the row locked, and the sweeper's UPDATE that ends the run waits behind it,
   unless the server ends that session (STUDIO_DB_IDLE_IN_TRANSACTION_S, studio.lib.database;
   --idle-in-transaction-s 0 shows it without).

After each case the stopped processes are continued (SIGCONT): the old attempt must notice it was
given up on and stop without touching the new one: no event written into the run after it ended, its
progress not moved back (workers.reporting.DatabaseReporter drops a superseded attempt's reports).
While a worker is stopped the bench samples PostgreSQL's sessions waiting on a lock. Printed: seconds from the stop to the run
declared lost, to running again (where), to done; the restart's from-step and steps done again;
whether every step is stored once at the end.

    python bench/fault_hung_worker.py                 # heartbeat 1 s, timeout 8 s, idle in a transaction 10 s
    python bench/fault_hung_worker.py --steps 30 --every 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import studio_stack as stack  # noqa: E402 - bench/ is the script's folder, first on the path

DB_NAME = "studio_bench_fault_hang"
REDIS_DB = 14


def steps_stored_once(run_id: int) -> tuple[int, int, int]:
    """(distinct steps with metrics, steps stored more than once for one key, rollouts' distinct steps)."""
    from django.db.models import Count

    from studio.runs.models import MetricPoint, Rollout

    points = MetricPoint.objects.filter(run_id=run_id)
    twice = points.values("step", "key").annotate(n=Count("id")).filter(n__gt=1).count()
    return (
        points.values("step").distinct().count(),
        twice,
        Rollout.objects.filter(run_id=run_id).values("step").distinct().count(),
    )


def restarts_of(run_id: int) -> list[dict]:
    from studio.runs.models import RunRestart

    return list(RunRestart.objects.filter(run_id=run_id).order_by("number").values("number", "reason", "from_step",
                                                                                  "steps_lost"))  # fmt: skip


def hold_lock(run_id: int) -> None:
    """`--hold-lock RUN`: a studio process that stops itself (SIGSTOP) half-way through a report's transaction,
    after the run row's UPDATE (studio.runs.events.record, what DatabaseReporter's every flush does) and
    before its COMMIT: a worker process hung at that moment, holding the run row's lock."""
    from django.db import transaction

    from studio.runs import events

    with transaction.atomic():
        events.record(run_id, [("log", None, {"line": "a report whose process hangs before it commits"})])
        os.kill(os.getpid(), signal.SIGSTOP)


def start_lock_holder(env: dict, run_id: int, log: Path):
    """The `hold_lock` process, once it has stopped itself inside its transaction."""
    import subprocess

    proc = subprocess.Popen([sys.executable, __file__, "--hold-lock", str(run_id)], cwd=ROOT, env=env,
                            stdout=log.open("a"), stderr=subprocess.STDOUT)  # fmt: skip
    stack.until("the lock holder stopped in its transaction", lambda: process_state(proc.pid) == "T", 60, 0.1)
    return proc


def process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def waiting_on_locks(database: str) -> int:
    """Sessions of the database waiting for a lock now (a sweeper stuck behind the hung transaction)."""
    import psycopg

    with psycopg.connect(f"{stack.SERVER_URL}/postgres", autocommit=True) as db:
        return db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                          (database,)).fetchone()[0]  # fmt: skip


def holder_ended(database: str) -> bool:
    """No session of the database is idle in a transaction any more (the hung one was ended)."""
    return stack.connections(database)["idle in transaction"] == 0


class LockWatch(threading.Thread):
    """The most sessions of the database seen waiting for a lock at once (a sweeper behind a hung transaction),
    and whether one stayed idle in a transaction, sampled every second."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.most_waiting = 0
        self.most_idle_in_transaction = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(1.0):
            with contextlib.suppress(Exception):  # a sample missed is a sample missed
                self.most_waiting = max(self.most_waiting, waiting_on_locks(DB_NAME))
                self.most_idle_in_transaction = max(self.most_idle_in_transaction,
                                                    stack.connections(DB_NAME)["idle in transaction"])  # fmt: skip


def written_after_end(run_id: int, ended_seq: int) -> dict:
    """What reached the run after it ended: its events past `ended_seq`, by kind, and its progress."""
    from django.db.models import Count

    from studio.runs.models import RunEvent

    kinds = dict(RunEvent.objects.filter(run_id=run_id, seq__gt=ended_seq).values_list("kind").annotate(n=Count("id")))
    return {"events": kinds, "last_step": stack.run_row(run_id)["last_step"]}


def case(name: str, experiment, user, workers: dict, args, env: dict, data_dir: Path) -> dict:
    from studio.experiments.services import launch
    from studio.runs.models import RUNNING, Run

    run = launch(experiment, user, name=f"hang: {name}", overrides=stack.quick_demo(args.steps, args.every))
    # A checkpoint first (and a step or two past it), so the restart has something to resume from.
    stack.until(f"run {run.pk} past its first checkpoint", lambda: stack.run_row(run.pk)["last_step"] >= args.every + 1,
                timeout=300)  # fmt: skip
    row = stack.run_row(run.pk)
    holder = next(w for w in workers if row["worker"].startswith(w))
    other = next(w for w in workers if w != holder)
    proc = workers[holder]
    pool = stack.children_of(proc.pid)
    stopped_at_step = row["last_step"]
    holder_proc = None
    if name == "locked":
        holder_proc = start_lock_holder(env, run.pk, data_dir / "lock-holder.log")
    t0 = time.monotonic()
    if name in ("whole", "locked"):
        os.killpg(os.getpgid(proc.pid), signal.SIGSTOP)
        stopped = f"worker {holder} (process group {proc.pid}: main + pool {pool})"
    else:
        for pid in pool:
            os.kill(pid, signal.SIGSTOP)
        stopped = f"the pool process {pool} of {holder} (its main process runs on)"
    if holder_proc is not None:
        stopped += f", and a process {holder_proc.pid} stopped inside a report's transaction on the run's row"
    print(f"[{name}] run {run.pk} at step {stopped_at_step} on {row['worker']}: SIGSTOP to {stopped}", flush=True)
    result = {"case": name, "run": run.pk, "stopped": stopped, "step_at_stop": stopped_at_step}
    watch = LockWatch()
    watch.start()
    try:
        stack.until("the run declared lost", lambda: stack.run_row(run.pk)["restarts"] >= 1, timeout=args.wait)
        result["lost_after_s"] = round(time.monotonic() - t0, 1)
        result["restart"] = restarts_of(run.pk)[0]
        print(f"[{name}]   declared lost after {result['lost_after_s']} s: {result['restart']['reason']}", flush=True)

        def running_again():
            r = stack.run_row(run.pk)
            return r if r["state"] == RUNNING and r["restarts"] >= 1 else None

        again = stack.until("the run running again", running_again, timeout=args.wait)
        result["running_again_after_s"] = round(time.monotonic() - t0, 1)
        result["running_again_on"] = again["worker"]
        print(f"[{name}]   running again after {result['running_again_after_s']} s on {again['worker']} "
              f"(from step {result['restart']['from_step']}, {result['restart']['steps_lost']} steps done again)",
              flush=True)  # fmt: skip
        done = stack.until("the run finished", lambda: (r := stack.run_row(run.pk))["state"] not in ("queued", "running")
                           and r, timeout=args.wait * 4)  # fmt: skip
        result["finished_after_s"] = round(time.monotonic() - t0, 1)
        result["final_state"], result["final_step"] = done["state"], done["last_step"]
    except SystemExit as exc:
        result["outcome"] = f"NOT RECOVERED: {exc}"
        result["state_then"] = stack.run_row(run.pk)
        print(f"[{name}]   {result['outcome']}; the run now: {result['state_then']}", flush=True)
    finally:
        watch.halt.set()
        result["most_sessions_waiting_on_a_lock"] = watch.most_waiting
        result["most_sessions_idle_in_transaction"] = watch.most_idle_in_transaction
        ended_seq = Run.objects.filter(pk=run.pk).values_list("last_seq", flat=True).get()
        os.killpg(os.getpgid(proc.pid), signal.SIGCONT)  # the stopped processes go on: the old attempt must stop
        if holder_proc is not None:
            result["lock_holder_session"] = "ended by the server" if holder_ended(DB_NAME) else "still open"
            holder_proc.send_signal(signal.SIGCONT)
            holder_proc.wait(30)
    print(f"[{name}]   while stopped: at most {watch.most_waiting} sessions waiting on a lock, "
          f"{watch.most_idle_in_transaction} idle in a transaction", flush=True)  # fmt: skip
    if "final_state" in result:
        time.sleep(args.after_cont)  # the continued attempt's next check: it must end nothing, write nothing
        after = stack.run_row(run.pk)
        late = written_after_end(run.pk, ended_seq)
        steps, twice, rollout_steps = steps_stored_once(run.pk)
        result.update(state_after_cont=after["state"], restarts_after_cont=after["restarts"], metric_steps=steps,
                      rollout_steps=rollout_steps, steps_stored_twice=twice, written_after_end=late)  # fmt: skip
        clean = not late["events"] and late["last_step"] == args.steps
        result["outcome"] = (
            "recovered" if after["state"] == "succeeded" and steps == args.steps and twice == 0 and clean
            else "WRONG"
        )  # fmt: skip
        print(f"[{name}]   {done['state']} at step {done['last_step']} after {result['finished_after_s']} s; after "
              f"SIGCONT the run is {after['state']} (restarts {after['restarts']}), at step {late['last_step']}, "
              f"events written into it after it ended {late['events'] or 'none'}; steps with metrics {steps}/"
              f"{args.steps}, with rollouts {rollout_steps}, step/key pairs stored twice {twice}: {result['outcome']}",
              flush=True)  # fmt: skip
    result["other_worker"] = other
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--beat-s", type=float, default=1.0, help="STUDIO_HEARTBEAT_INTERVAL_S")
    parser.add_argument("--timeout-s", type=float, default=8.0, help="STUDIO_HEARTBEAT_TIMEOUT_S")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds each stage may take")
    parser.add_argument("--after-cont", type=float, default=5.0, help="seconds to watch after SIGCONT")
    parser.add_argument("--cases", default="whole,pool,locked")
    parser.add_argument(
        "--idle-in-transaction-s",
        type=float,
        default=10.0,
        help="STUDIO_DB_IDLE_IN_TRANSACTION_S (the studio's default is 60; 0: off, as before the fix)",
    )
    parser.add_argument("--hold-lock", type=int, help=argparse.SUPPRESS)  # the lock holder's own process
    args = parser.parse_args()
    if args.hold_lock:
        import django

        django.setup()
        hold_lock(args.hold_lock)
        return

    data_dir = Path(tempfile.mkdtemp(prefix="studio-fault-hang-"))
    env = stack.studio_env(stack.fresh_database(DB_NAME), stack.clean_redis(REDIS_DB), data_dir,
                           STUDIO_HEARTBEAT_INTERVAL_S=str(args.beat_s), STUDIO_HEARTBEAT_TIMEOUT_S=str(args.timeout_s),
                           STUDIO_ADMIN_PASSWORD="bench-password-123",
                           STUDIO_DB_IDLE_IN_TRANSACTION_S=str(args.idle_in_transaction_s))  # fmt: skip
    experiment, user = stack.demo_studio(env)
    workers = {name: stack.start_worker(env, f"{name}@%h", data_dir / f"{name}.log") for name in ("hang-a", "hang-b")}
    results = []
    try:
        for name in args.cases.split(","):
            results.append(case(name, experiment, user, workers, args, env, data_dir))
    finally:
        for proc in workers.values():
            os.killpg(os.getpgid(proc.pid), signal.SIGCONT)
            stack.stop(proc, grace=30)
    print(f"\nhung worker, heartbeat every {args.beat_s:g} s, lost after {args.timeout_s:g} s, a session idle in a "
          f"transaction ended after {args.idle_in_transaction_s:g} s (0: never); load average "
          f"{stack.load_average()}; logs in {data_dir}")  # fmt: skip
    for r in results:
        print(f"  {r['case']:<6} stopped at step {r['step_at_stop']}: lost after {r.get('lost_after_s')} s, running "
              f"again after {r.get('running_again_after_s')} s on {r.get('running_again_on')}, done after "
              f"{r.get('finished_after_s')} s ({r.get('final_state')}); {r['outcome']}")  # fmt: skip


if __name__ == "__main__":
    main()
