"""One run over several machines (parallel.nodes > 1): a Ray cluster, through Ray Train's TorchTrainer.

`train_on_ray(spec, reporter, should_stop, address=...)` is `trainers.run.loop.train` for such a run,
called by the process that owns the run (the studio's Celery task; anything else that holds a Reporter).
That process is the Ray *driver*: it connects to the cluster (`ray.init(address=...)`), starts
nodes x procs_per_node Ray Train workers, and stays in charge until they end. Each worker is one rank:
Ray Train starts it on its node, sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR and joins the torch
process group (gloo on CPUs, NCCL on GPUs), and the worker calls `train(spec, reporter, should_stop)`,
the same function a one-machine run calls.

Placement: ranks n*P .. n*P+P-1 (P = procs_per_node) go to the n-th of `nodes` machines the driver picks
(`place`), pinned with one Ray label selector per worker on the node id every Ray node carries
(`ray.io/node-id`). Ray Train numbers the workers node by node, so the device mesh the trainer builds
(nodes x procs_per_node: hybrid sharding shards within a row and replicates across rows) has one row per
machine. The alternatives place less exactly: STRICT_SPREAD puts each bundle on its own node, and Ray
Train makes one bundle per worker, so it can only place procs_per_node 1; PACK and SPREAD are soft (PACK
puts both halves of a 2 x 4 run on one 8-GPU machine, SPREAD scatters it over eight); a custom per-node
resource would need every machine started with a count matching one run's procs_per_node. Node ids need
nothing from whoever started the machines. The driver picks nodes that have room for P processes each
(a GPU and `cpus_per_process` CPUs per process on a cluster with GPUs, CPUs alone otherwise), those with
the most free first, and refuses at once a run the cluster has too few such nodes for.

Reports and stop: a small actor (`Mailbox`) next to the driver. Rank 0 reports through
`trainers.report.EventReporter` whose `send` puts each event (a JSON-safe dict) into the mailbox; the
driver takes them a few times a second and `replay`s them, in order, into its own reporter (the studio's
DatabaseReporter: the one writer of the run's rows, batching exactly as for a one-process run). To stop,
the driver raises the mailbox's flag; every rank's `should_stop` asks the mailbox, and the n-th question
gets the same answer on every rank (decided when the first rank asks it), so the ranks agree on the step
they stop before even without the trainer's own `any_process` over `should_stop`. Why this way: the
cluster's machines need no database, no studio code and no credentials, nothing on them connects back to
the studio's machine except through Ray's own connections, and the embedded SQLite default works, since
only the driver's process writes the run.

Failures: Ray Train watches every worker (health checks of each actor, and each rank's exception). A
rank that dies (killed, out of memory, crashed) or raises makes `fit` raise WorkerGroupError with each
failed rank's error; nothing is retried (FailureConfig(max_failures=0, max_preemption_failures=0): a restart
would train again from step 0 and report everything twice). A worker group that cannot start yet (its
GPUs busy with other jobs) is started again by Ray Train until it can: the run waits for resources. The driver raises `RankFailed` naming the rank that died first (the
others then fail in their collectives), its host and pid, and puts the failed ranks' tracebacks and the
tail of the ranks' Ray logs (which Ray streams to the driver from every node) in the run's log.
A cancel raises the stop flag: the ranks finish their step (with the final checkpoint when save_final,
as a one-process run does) and end "cancelled"; ranks still running `stop_grace_s` later are killed
(`ray.kill` on each rank's actor). The driver ends its Ray connection at the end, and if the driver's
process itself dies, Ray ends its job with it (the workers belong to the driver's job), so no rank
outlives the process that owns the run.

Files: the ranks read the spec's paths (model, data) and write checkpoint.output_dir (rank 0; every rank
with sharded checkpoints) where they run. On one machine that is the driver's filesystem; a cluster of
several machines needs a shared filesystem mounted at the same path everywhere (docs/gpu-workers.md).
The driver writes a marker file into output_dir and every rank checks it sees it before training, so a
folder that is not shared fails at once with that message, not at the first checkpoint.

Code: the driver ships its own trainers/ package with the job (Ray's runtime_env py_modules), so the
machines need the Python environment (torch, transformers, ray...), not a checkout of the same commit.

`ray` is optional (`./studioctl setup` installs it where it installs): it is imported inside the
functions here, and nothing the studio or a one-machine run loads imports this module.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.report import EventReporter, PlainFailure, Reporter, RunResult, replay
from trainers.spec import RunSpec

NODE_ID_LABEL = "ray.io/node-id"
MARKER_PREFIX = ".ray-shared-check-"
RANK_ACTORS = ("RayTrainWorker", "TrainController")  # whose Ray log lines the failure tail keeps
LOG_TAIL_LINES = 40
KILL_WAIT_S = 60.0  # after killing the ranks, how long Ray Train may take to notice before the job is ended
DEAD = ("ActorDiedError", "RayActorError", "WorkerHealthCheckFailedError", "ActorUnavailableError")

Loop = Callable[[RunSpec, Reporter, Callable[[], bool]], Any]  # train's signature; returns a RunResult


class ClusterError(RuntimeError):
    """The Ray cluster cannot take this run: unreachable, or too few machines with room for it."""


class RankFailed(RuntimeError):
    """A rank of the run died or raised; the message names it, its machine and its error."""


# --- placement -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Which Ray node holds which ranks: node_ids[n] holds ranks n*procs_per_node .. +procs_per_node-1."""

    node_ids: tuple[str, ...]
    procs_per_node: int
    use_gpu: bool
    resources_per_worker: dict[str, float]

    @property
    def num_workers(self) -> int:
        return len(self.node_ids) * self.procs_per_node

    @property
    def label_selector(self) -> list[dict[str, str]]:
        """One selector per worker, in rank order (what ScalingConfig(label_selector=...) takes)."""
        return [{NODE_ID_LABEL: node} for node in self.node_ids for _ in range(self.procs_per_node)]


def place(
    nodes: list[dict[str, Any]],
    available: dict[str, dict[str, float]],
    n_nodes: int,
    procs_per_node: int,
    cpus_per_process: float = 1.0,
) -> Placement:
    """Pick `n_nodes` nodes of `nodes` (as `ray.nodes()` lists them) with room for `procs_per_node`
    processes each: a GPU and `cpus_per_process` CPUs per process where the cluster has GPUs, CPUs alone
    otherwise. The nodes with the most free (`available`: node id -> free resources) come first.
    Raises ClusterError when fewer nodes than `n_nodes` could ever hold that many processes."""
    alive = [n for n in nodes if n.get("Alive", n.get("alive"))]
    use_gpu = any(float(n.get("Resources", {}).get("GPU", 0)) > 0 for n in alive)
    per_process = {"CPU": float(cpus_per_process), **({"GPU": 1.0} if use_gpu else {})}

    def room(resources: dict[str, float]) -> float:
        """How many of the run's processes these resources hold."""
        return min(float(resources.get(k, 0)) / v for k, v in per_process.items() if v > 0)

    fits = [n for n in alive if room(n.get("Resources", {})) >= procs_per_node]
    if len(fits) < n_nodes:
        what = " and ".join(f"{v:g} {k}" for k, v in sorted(per_process.items()))
        raise ClusterError(
            f"the run asks for {n_nodes} nodes x {procs_per_node} processes, but the Ray cluster has "
            f"{len(fits)} node(s) with room for {procs_per_node} processes of {what} each "
            f"({len(alive)} node(s) alive): join more machines to it (docs/gpu-workers.md) or lower parallel.nodes"
        )
    fits.sort(key=lambda n: (-room(available.get(n["NodeID"], {})), n["NodeID"]))
    return Placement(tuple(n["NodeID"] for n in fits[:n_nodes]), procs_per_node, use_gpu, per_process)


# --- between the driver and the ranks ------------------------------------------------------------------


class Mailbox:
    """The run's mailbox, a Ray actor beside the driver: rank 0's report events in order, where each rank
    runs, and the stop flag. (A plain class; `ray.remote` makes the actor at launch.)"""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.stop_requested = False
        self.answers: list[bool] = []  # the n-th should_stop answer, the same for every rank
        self.asked: dict[int, int] = {}
        self.ranks: dict[int, dict[str, Any]] = {}
        self.actors: dict[int, Any] = {}

    def put(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def take(self) -> list[dict[str, Any]]:
        events, self.events = self.events, []
        return events

    def hello(self, rank: int, where: dict[str, Any], actor: Any) -> None:
        self.ranks[rank] = where
        self.actors[rank] = actor
        self.events.append({"kind": "log", "line": f"rank {rank}: {describe_where(where)}"})

    def where(self) -> dict[int, dict[str, Any]]:
        return dict(self.ranks)

    def rank_actors(self) -> list[Any]:
        return list(self.actors.values())

    def request_stop(self) -> None:
        self.stop_requested = True

    def should_stop(self, rank: int) -> bool:
        asked = self.asked.get(rank, 0)
        self.asked[rank] = asked + 1
        if asked == len(self.answers):  # the first rank to ask this question decides it for all
            self.answers.append(self.stop_requested)
        return self.answers[asked]


def describe_where(where: dict[str, Any]) -> str:
    return f"{where.get('host', '?')} (Ray node {str(where.get('node', '?'))[:12]}), pid {where.get('pid', '?')}"


def rank_main(config: dict[str, Any]) -> dict[str, Any]:
    """The function every Ray Train worker runs: one rank of the run (Ray Train has set the torch
    variables and joined the process group). Returns the RunResult as a dict (rank 0's reaches the driver)."""
    import ray  # the Ray worker's own; optional everywhere else

    mailbox = config["mailbox"]
    rank = int(os.environ.get("RANK", "0"))
    context = ray.get_runtime_context()
    where = {"host": socket.gethostname(), "node": context.get_node_id(), "pid": os.getpid()}
    ray.get(mailbox.hello.remote(rank, where, context.current_actor))
    spec = RunSpec.model_validate(config["spec"])
    marker = Path(spec.checkpoint.output_dir) / config["marker"]
    if not marker.exists():
        raise RuntimeError(
            f"rank {rank} on {where['host']} does not see the run's output folder {spec.checkpoint.output_dir} "
            f"as the driver does (no {marker.name} there): on a cluster of several machines, the output "
            "folder must be on a filesystem every machine mounts at the same path (docs/gpu-workers.md)"
        )
    loop: Loop = config.get("loop") or _train
    reporter = EventReporter(lambda event: ray.get(mailbox.put.remote(event)))
    result = loop(spec, reporter, lambda: bool(ray.get(mailbox.should_stop.remote(rank))))
    return {
        "status": result.status,
        "steps": int(getattr(result, "steps", 0)),
        "metrics": {k: float(v) for k, v in (getattr(result, "metrics", None) or {}).items()},
        "checkpoint": getattr(result, "checkpoint", None),
        "detail": getattr(result, "detail", ""),
    }


def _train(spec: RunSpec, reporter: Reporter, should_stop: Callable[[], bool]) -> Any:
    from trainers.run.loop import train  # torch and the trainer: loaded on the rank, not by the driver's module

    return train(spec, reporter, should_stop)


class RayLogTail:
    """The last lines the ranks (and Ray Train's controller) wrote, as Ray streams them to the driver from
    every node. Ray offers no public hook for them: this uses the dispatcher its own printing uses, and
    keeps nothing where that is missing (the failure message then says to look at the Ray logs)."""

    def __init__(self, lines: int = LOG_TAIL_LINES * 4) -> None:
        self.lines: deque[str] = deque(maxlen=lines)
        self.dispatcher: Any = None
        self.name = f"rollout-run-tail-{uuid.uuid4().hex[:8]}"

    def attach(self) -> RayLogTail:
        try:
            from ray._private.ray_logging import global_worker_stdstream_dispatcher  # private: see the class
        except ImportError:
            return self
        self.dispatcher = global_worker_stdstream_dispatcher
        self.dispatcher.add_handler(self.name, self._handle)
        return self

    def detach(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.remove_handler(self.name)
            self.dispatcher = None

    def _handle(self, data: dict[str, Any]) -> None:
        actor = str(data.get("actor_name") or "")
        if not actor.startswith(RANK_ACTORS):
            return
        prefix = f"({actor} pid={data.get('pid')}, {data.get('ip')})"
        for line in data.get("lines") or []:
            self.lines.append(f"{prefix} {line}")

    def tail(self, count: int = LOG_TAIL_LINES) -> list[str]:
        return list(self.lines)[-count:]


# --- the driver ------------------------------------------------------------------------------------------


class _Fit(threading.Thread):
    """`TorchTrainer.fit()` in a thread (Ray Train supports that: it skips its SIGINT handler there, which
    would replace the Celery worker's), so the driver's own thread takes events and checks for a stop."""

    def __init__(self, trainer: Any) -> None:
        super().__init__(name="ray-train-fit", daemon=True)
        self.trainer = trainer
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.trainer.fit()
        except BaseException as exc:  # noqa: BLE001 - handed to the driver's thread, which explains it
            self.error = exc


def train_on_ray(
    spec: RunSpec,
    reporter: Reporter,
    should_stop: Callable[[], bool] = lambda: False,
    *,
    address: str | None,
    stop_grace_s: float = 120.0,
    cpus_per_process: float = 1.0,
    poll_s: float = 0.25,
    loop: Loop | None = None,
) -> Any:
    """Run `spec` on the Ray cluster at `address` as nodes x procs_per_node ranks (see the module's
    docstring); reports reach `reporter` from this thread. Returns rank 0's result ("succeeded",
    "cancelled", or "failed" as the trainer decided); raises ClusterError when the cluster cannot take the
    run and RankFailed when a rank died or raised. `loop` replaces `train` on the ranks (tests)."""
    import ray  # optional: only a process that launches a multi-machine run needs it
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    parallel = spec.parallel
    owned = not ray.is_initialized()
    if owned:
        if not address:  # ray.init() without one would start a private cluster on this machine
            raise ClusterError("no Ray cluster is configured for runs on several nodes (RAY_ADDRESS)")
        package = str(Path(__file__).resolve().parent)
        try:
            with _stderr_with_a_file():
                ray.init(address=address, runtime_env={"py_modules": [package]}, log_to_driver=True)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, a bad address, a version mismatch...
            raise ClusterError(
                f"could not connect to the Ray cluster at {address!r}: {type(exc).__name__}: {exc}"
            ) from exc
    tail = RayLogTail().attach()
    output_dir = Path(spec.checkpoint.output_dir)
    marker = output_dir / f"{MARKER_PREFIX}{uuid.uuid4().hex}"
    try:
        placement = place(_nodes(ray), _available(ray), parallel.nodes, parallel.procs_per_node, cpus_per_process)
        device = "GPU" if placement.use_gpu else "CPU (gloo)"
        reporter.log(
            f"Ray cluster {address or '(this process)'}: {placement.num_workers} {device} processes, "
            f"{placement.procs_per_node} on each of {len(placement.node_ids)} nodes"
        )
        output_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text("written by the run's Ray driver; every rank checks that it sees it\n")
        here = ray.get_runtime_context().get_node_id()
        mailbox = ray.remote(num_cpus=0, label_selector={NODE_ID_LABEL: here})(Mailbox).remote()
        trainer = TorchTrainer(
            rank_main,
            train_loop_config={
                "spec": spec.model_dump(mode="json"),
                "mailbox": mailbox,
                "marker": marker.name,
                "loop": loop,
            },
            scaling_config=ScalingConfig(
                num_workers=placement.num_workers,
                use_gpu=placement.use_gpu,
                resources_per_worker=placement.resources_per_worker,
                label_selector=placement.label_selector,
            ),
            run_config=RunConfig(
                name=f"run-{uuid.uuid4().hex[:12]}",
                storage_path=str(output_dir / "ray"),
                # Never restart the ranks: a restart trains again from step 0 and reports it all twice.
                # (A worker group that cannot start yet, for want of free GPUs, is tried again: that is
                # waiting for resources, not a restart.)
                failure_config=FailureConfig(max_failures=0, max_preemption_failures=0),
            ),
        )
        fit = _Fit(trainer)
        fit.start()
        last_step = _Steps(reporter)
        stop_asked_at: float | None = None
        killed_at: float | None = None
        while fit.is_alive():
            fit.join(poll_s)
            for event in ray.get(mailbox.take.remote()):
                replay(event, last_step)
            if stop_asked_at is None and should_stop():
                ray.get(mailbox.request_stop.remote())
                stop_asked_at = time.monotonic()
                reporter.log("stop requested: every rank stops before its next step")
            elif stop_asked_at is not None and killed_at is None and time.monotonic() - stop_asked_at > stop_grace_s:
                reporter.log(f"the ranks had not stopped {stop_grace_s:g} s after the stop request: killing them")
                for actor in ray.get(mailbox.rank_actors.remote()):
                    ray.kill(actor)
                killed_at = time.monotonic()
            elif killed_at is not None and time.monotonic() - killed_at > KILL_WAIT_S:
                break  # Ray Train has not noticed: ending the job (below) ends whatever is left of it
        for event in ray.get(mailbox.take.remote()):  # the last reports, sent before the ranks returned
            replay(event, last_step)
        if killed_at is not None:
            detail = f"stopped by force {stop_grace_s:g} s after the stop request, at step {last_step.step}"
            return RunResult("cancelled", last_step.step, detail=detail)
        if fit.error is not None:
            where = _safe(lambda: ray.get(mailbox.where.remote()), {})
            message, details = explain_failure(fit.error, where)
            for block in details:
                reporter.log(block)
            lines = tail.tail()
            if lines:
                reporter.log("the ranks' Ray logs, last lines:\n" + "\n".join(lines))
            else:
                reporter.log("no Ray log lines reached the driver: see the Ray logs on the machines "
                             "(/tmp/ray/session_latest/logs)")  # fmt: skip
            raise RankFailed(message)
        value = getattr(fit.result, "return_value", None) or {}
        return RunResult(
            value.get("status", "failed"), int(value.get("steps", last_step.step)), dict(value.get("metrics") or {}),
            value.get("checkpoint"), value.get("detail") or "rank 0 returned no result",
        )  # fmt: skip
    finally:
        tail.detach()
        marker.unlink(missing_ok=True)
        if owned:
            ray.shutdown()  # ends the job: any actor of it still alive (a stray rank) goes with it


class _Steps:
    """Passes every report on to `reporter`, noting the last step reported."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.step = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reporter, name)

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.step = max(self.step, step)
        self.reporter.metrics(step, values)


def explain_failure(error: BaseException, where: dict[int, dict[str, Any]]) -> tuple[str, list[str]]:
    """(one message naming the rank that failed first, its machine and its error; the log blocks: each
    failed rank's full error). A rank that died is named before ranks that raised, since a dead peer
    makes the others fail in their next collective."""
    failures: dict[int, BaseException] = getattr(error, "worker_failures", None) or {}
    if not failures:
        text = "".join(traceback.format_exception(error)).rstrip()
        return f"the Ray job failed: {type(error).__name__}: {_first_line(str(error))}", [text]
    order = sorted(failures, key=lambda r: (not _died(failures[r]), r))
    plain = _plain(failures[order[0]])
    if plain is not None:  # one line saying what to do (a model no rank can download), as in one process
        return plain, [f"rank {rank} failed:\n" + "".join(traceback.format_exception(failures[rank])).rstrip()
                       for rank in order]  # fmt: skip
    parts, details = [], []
    for rank in order:
        exc = failures[rank]
        place_ = f" on {describe_where(where[rank])}" if rank in where else ""
        verb = "died" if _died(exc) else "failed"
        parts.append(f"rank {rank}{place_} {verb}: {_reason(exc)}")
        details.append(f"rank {rank} {verb}:\n" + "".join(traceback.format_exception(exc)).rstrip())
    message = parts[0] + (f" (then {'; '.join(parts[1:])})" if parts[1:] else "")
    return message, details


def _plain(exc: BaseException) -> str | None:
    """The message of a PlainFailure a rank raised (Ray hands it back wrapped, the original as `cause`)."""
    for link in (getattr(exc, "cause", None), exc):  # the original first: the wrapper's text has a traceback
        if isinstance(link, PlainFailure):
            return str(link)
    return None


def _died(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & set(DEAD)) or "actor died" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if _died(exc):
        start = text.find("The actor is dead because")
        if start >= 0:
            reason = text[start:]
            cut = reason.find(" Some common causes")
            return reason[: cut if cut >= 0 else 400].strip()
        return _first_line(text) or type(exc).__name__
    return f"{type(exc).__name__}: {_first_line(text)}"


def _first_line(text: str, limit: int = 400) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "")[:limit]


@contextmanager
def _stderr_with_a_file() -> Iterator[None]:
    """sys.stderr as a real file while Ray connects (it enables faulthandler on it): a Celery worker
    replaces it with a logging proxy that has no file descriptor."""
    try:
        sys.stderr.fileno()
        usable = True
    except (AttributeError, OSError, ValueError):
        usable = False
    if usable or sys.__stderr__ is None:
        yield
        return
    replaced, sys.stderr = sys.stderr, sys.__stderr__
    try:
        yield
    finally:
        sys.stderr = replaced


def _nodes(ray: Any) -> list[dict[str, Any]]:
    return list(ray.nodes())


def _available(ray: Any) -> dict[str, dict[str, float]]:
    """Free resources per node id; {} where Ray does not say (the choice then goes by node id)."""
    try:
        from ray._private import state  # a developer API, used only to prefer idle nodes

        return dict(state.available_resources_per_node())
    except Exception:  # noqa: BLE001 - only an ordering hint
        return {}


def _safe(get: Callable[[], Any], default: Any) -> Any:
    try:
        return get()
    except Exception:  # noqa: BLE001 - the mailbox may be gone with the job; the message goes without it
        return default
