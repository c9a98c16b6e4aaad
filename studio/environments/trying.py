"""The "try it" panel: run a few episodes of an environment with a model or a run's checkpoint,
on a worker (models and user tools never run in the web process).

The page does not wait: `send_try` sends the task and the page asks `progress` about it every second
(waiting for a worker and why, the worker's stage, the episodes, or the error), so a try while a run
trains shows where it is instead of a page that hangs; the API's try waits for the answer
(`try_environment`). Either gives up after ENVIRONMENT_TRY_TIMEOUT_S and asks the worker to stop."""

from __future__ import annotations

import time
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings

from studio.celery import TRY_ENVIRONMENT_TASK, TRYING_STATE
from studio.celery import app as celery_app
from studio.environments.configs import ConfigError, validate_environment
from studio.experiments import paths
from studio.fleet.queues import task_queue, unanswered_reason
from studio.lib.errors import FieldErrors
from studio.runs.models import RUNNING, Checkpoint, Run

MAX_ROWS = 4
MAX_EPISODES = 4  # per row
# Why a viewer may try the saved environment but not an unsaved one: it may hold tool code.
UNSAVED_NEEDS_EDIT = (
    "trying an unsaved environment runs its tools and code on a worker, so it needs the owner or editor role; "
    "viewers may try the saved environment"
)


class TryError(FieldErrors, ValueError):
    """Why the try-it refuses or failed, as {field: message}; `status` 400, 403, 502 or 504."""

    def __init__(self, errors: dict[str, str], status: int = 400) -> None:
        super().__init__(errors, status=status)


def config_to_try(saved: dict[str, Any] | None, unsaved: Any, may_edit: bool) -> dict[str, Any]:
    """The unsaved config for owners and editors, else the saved one (the rubric try-it's rule)."""
    if not unsaved:
        if saved is None:
            raise TryError({"config": "give an environment config to try"})
        return saved
    try:
        config = validate_environment(unsaved)
    except ConfigError as exc:
        raise TryError({f"config.{k}": v for k, v in exc.errors.items()}) from None
    if may_edit or (saved is not None and config == validate_environment(saved)):
        return config
    raise TryError({"config": UNSAVED_NEEDS_EDIT}, 403)


def model_to_try(team, model_path: str = "", checkpoint_id: int | None = None) -> dict[str, str | None]:
    """{"model_path", "checkpoint"} for the worker: a model the team may load, or one of its runs'
    checkpoints (on top of that run's model); TryError naming the field otherwise. The worker checks
    the paths again for the team (workers.tasks.try_environment) before it reads them."""
    if checkpoint_id:
        checkpoint = Checkpoint.objects.filter(pk=checkpoint_id, run__team=team).select_related("run").first()
        if checkpoint is None:
            raise TryError({"checkpoint": "no such checkpoint in this team"})
        base = (checkpoint.run.spec.get("model") or {}).get("path") or ""
        error = paths.model_path_error(checkpoint.path, team) or paths.model_path_error(base, team)
        if error:
            raise TryError({"checkpoint": error})
        return {"model_path": base, "checkpoint": checkpoint.path}
    if not model_path:
        raise TryError({"model": "give a model path or a checkpoint"})
    error = paths.model_path_error(model_path, team) or paths.missing_folder_error(model_path)
    if error:
        raise TryError({"model": error})
    return {"model_path": model_path, "checkpoint": None}


def check_rows(rows: Any) -> list[dict[str, Any]]:
    """Dataset-like rows ({prompt or messages, answer?, ...}), at most MAX_ROWS of them."""
    if not isinstance(rows, list) or not rows:
        raise TryError({"rows": "give at least one row: {prompt, answer?, ...}"})
    if len(rows) > MAX_ROWS:
        raise TryError({"rows": f"at most {MAX_ROWS} rows at a time"})
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not (row.get("prompt") or row.get("messages")):
            raise TryError({f"rows.{i}": "a row needs a prompt (text) or messages"})
    return rows


def send_try(config: dict[str, Any], model: dict[str, str | None], rows: list[dict[str, Any]],
             episodes: int = 2, team=None) -> str:  # fmt: skip
    """Check the try and send workers.try_environment; its task id. TryError naming the field when the
    config, rows or episodes are refused. The paths the config names are checked for `team` here and on
    the worker (None: only what any team may read)."""
    config = validate_environment(config)
    rows = check_rows(rows)
    errors = paths.environment_errors(config, team)
    if errors:
        raise TryError({f"config.{k}": v for k, v in errors.items()})
    if not 1 <= int(episodes) <= MAX_EPISODES:
        raise TryError({"episodes": f"between 1 and {MAX_EPISODES} per row"})
    result = celery_app.send_task(TRY_ENVIRONMENT_TASK, args=[config, model, rows, int(episodes)],
                                  kwargs={"team_id": team.pk if team else None})  # fmt: skip
    return result.id


def try_environment(config: dict[str, Any], model: dict[str, str | None], rows: list[dict[str, Any]],
                    episodes: int = 2, timeout_s: float | None = None, team=None) -> dict[str, Any]:  # fmt: skip
    """Send the try and wait: {"episodes": [[episode dict]]} (per row, per sample). TryError 504 when no
    answer comes in time, saying why as far as the studio can tell."""
    result = celery_app.AsyncResult(send_try(config, model, rows, episodes, team))
    timeout_s = settings.ENVIRONMENT_TRY_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        answer = result.get(timeout=timeout_s, propagate=True, disable_sync_subtasks=False)
    except CeleryTimeout:
        state, info = result.state, result.info
        result.revoke(terminate=True)  # a running task would otherwise hold the worker until its episodes end
        raise TryError({"detail": timeout_message(state, info, timeout_s)}, 504) from None
    except Exception as exc:  # noqa: BLE001 - the task itself crashed on the worker
        raise TryError({"detail": f"the episodes failed on the worker: {type(exc).__name__}: {exc}"}, 502) from None
    if "error" in answer:
        raise TryError({"detail": answer["error"]}, 400)
    return answer


# A try no worker has taken after this long says why (no worker, every one busy) instead of "sent".
SAY_WHY_AFTER_S = 5.0


def progress(task_id: str, sent: float, timeout_s: float | None = None) -> dict[str, Any]:
    """Where the try sent at `sent` (epoch seconds) is: {"state": "waiting" | "running" | "done" | "failed",
    "message": words for the page, "waited_s", and "episodes" when done}. Past the timeout it is failed
    (with timeout_message's reason) and the worker is asked to stop."""
    timeout_s = settings.ENVIRONMENT_TRY_TIMEOUT_S if timeout_s is None else timeout_s
    result = celery_app.AsyncResult(task_id)
    waited = max(0.0, time.time() - sent)
    state, info = result.state, result.info
    out: dict[str, Any] = {"waited_s": round(waited, 1)}
    if state == "SUCCESS":
        answer = result.result
        if not isinstance(answer, dict) or "episodes" not in answer:
            error = answer.get("error") if isinstance(answer, dict) else None
            return {**out, "state": "failed", "message": str(error or "the worker gave no episodes")}
        return {**out, "state": "done", "message": "", "episodes": answer["episodes"]}
    if state == "REVOKED":
        return {**out, "state": "failed", "message": "stopped before its episodes were done"}
    if state == "FAILURE":
        why = f"{type(info).__name__}: {info}" if isinstance(info, BaseException) else str(info)
        return {**out, "state": "failed", "message": f"the episodes failed on the worker: {why}"}
    if waited > timeout_s:
        result.revoke(terminate=True)
        return {**out, "state": "failed", "message": timeout_message(state, info, timeout_s)}
    if state == TRYING_STATE and isinstance(info, dict) and info.get("stage"):
        return {**out, "state": "running", "message": f"{info['stage']}…"}
    if waited < SAY_WHY_AFTER_S:
        return {**out, "state": "waiting", "message": "sent to a worker…"}
    return {**out, "state": "waiting", "message": unanswered_reason(task_queue(TRY_ENVIRONMENT_TASK), f"{waited:.0f} s")}


def stop(task_id: str) -> None:
    """Ask the worker to stop the try (a queued one is dropped when a worker takes it)."""
    celery_app.AsyncResult(task_id).revoke(terminate=True)


def timeout_message(state: str, info: Any, timeout_s: float) -> str:
    """Why a try got no answer in time: the worker was still at a stage it names, or no worker
    serves the queue, or all of them were busy; and the runs that trained meanwhile, if any."""
    waited = f"{timeout_s:.0f} s"
    busy = f" {note}" if (note := training_note(timeout_s)) else ""
    if state == TRYING_STATE and isinstance(info, dict) and info.get("stage"):
        return (f"the worker was still {info['stage']} after {waited}; the studio stopped waiting and asked it to "
                f"stop. Try fewer rows or episodes, fewer turns, or a smaller token budget.{busy}")  # fmt: skip
    if state not in ("PENDING", None):
        return f"the worker had not finished after {waited}; the studio stopped waiting and asked it to stop.{busy}"
    return unanswered_reason(task_queue(TRY_ENVIRONMENT_TASK), waited) + (f".{busy}" if busy else "")


def training_note(timeout_s: float | None = None) -> str:
    """What a try shares its machine with, said before it is sent (the try-it panel) and when it times out:
    the runs training now. The try has a worker of its own (the 'default' queue's), but on one machine the
    episodes share its processors with the training, which can make them several times slower (issue 39: a
    try blocked for 180 s and gave up, saying nothing of the run). "" when no run trains."""
    running = list(Run.objects.filter(state=RUNNING).order_by("pk").values_list("pk", "name", "last_step",
                                                                                  "total_steps")[:3])  # fmt: skip
    if not running:
        return ""
    runs = ", ".join(f"#{pk} {name!r} (step {step} of {total})" for pk, name, step, total in running)
    limit = settings.ENVIRONMENT_TRY_TIMEOUT_S if timeout_s is None else timeout_s
    return (f"Run{'s' if len(running) > 1 else ''} {runs} {'are' if len(running) > 1 else 'is'} training now: where "
            "it shares the workers' machine, the episodes share its processors and can take several times longer "
            f"(a try gives up after {limit:.0f} s). Fewer rows, episodes or tokens answer sooner; or try once it "
            "ends, or stop it.")  # fmt: skip
