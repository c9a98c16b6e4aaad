"""The "try it" panel: score pairs with a rubric on a worker (user code never runs in the web process)."""

from __future__ import annotations

from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from pydantic import ValidationError

from studio.celery import SCORE_RUBRIC_TASK, SCORING_STATE
from studio.celery import app as celery_app
from studio.experiments import paths
from studio.fleet.queues import task_queue, unanswered_reason
from studio.lib import json_limits
from studio.lib.errors import FieldErrors
from trainers.spec import RubricSpec, validation_errors

MAX_PAIRS = 32
# Why a viewer may try the saved rubric but not an unsaved one: criteria can hold code.
UNSAVED_NEEDS_EDIT = (
    "scoring an unsaved rubric runs its criteria (a python criterion's code included) on a worker, "
    "so it needs the owner or editor role; viewers may try the saved rubric"
)


class TryError(FieldErrors, ValueError):
    """Why the try-it refuses or failed, as {field: message}; `status` 400, 403, 502 or 504."""

    def __init__(self, errors: dict[str, str], status: int = 400) -> None:
        super().__init__(errors, status=status)


def validate_rubric(spec: Any) -> dict[str, Any]:
    try:
        checked = RubricSpec.model_validate(spec).model_dump(mode="json")
    except ValidationError as exc:
        raise TryError({f"spec.{k}": v for k, v in validation_errors(exc).items()}) from None
    if errors := json_limits.non_finite_errors(checked):
        raise TryError({f"spec.{k}": v for k, v in errors.items()})
    return checked


def rubric_warnings(spec: Any) -> dict[str, str]:
    """The schema's warnings about a rubric spec ({} for one it refuses: its errors say more)."""
    try:
        return RubricSpec.model_validate(spec).warnings()
    except ValidationError:
        return {}


def spec_to_try(saved: dict[str, Any] | None, unsaved: Any, may_edit: bool) -> dict[str, Any]:
    """The rubric "try it" scores: the unsaved spec for owners and editors, else the saved one.

    A viewer sending an unsaved spec that differs from the saved rubric gets TryError 403;
    the same spec as the saved one is no new code, so it is scored.
    """
    if not unsaved:
        if saved is None:
            raise TryError({"spec": "give a rubric spec to score"})
        return saved
    if may_edit:
        return unsaved
    if saved is not None and _same_rubric(unsaved, saved):
        return saved
    raise TryError({"spec": UNSAVED_NEEDS_EDIT}, 403)


def _same_rubric(spec: Any, saved: dict[str, Any]) -> bool:
    try:
        return validate_rubric(spec) == validate_rubric(saved)
    except TryError:
        return False


def try_rubric(spec: dict[str, Any], pairs: list[dict[str, Any]], timeout_s: float | None = None,
               team=None) -> dict[str, Any]:  # fmt: skip
    """Send workers.score_rubric and wait for its answer; TryError with 504 when no worker answers.
    A judge's model path and endpoint are checked for `team` here and on the worker (the path
    policy; None: only what any team may read)."""
    spec = validate_rubric(spec)
    refused = paths.rubric_errors(spec, team)
    if refused:
        raise TryError({f"spec.{k}": v for k, v in refused.items()})
    if not isinstance(pairs, list) or not pairs:
        raise TryError({"pairs": "give at least one {prompt, completion} pair"})
    if len(pairs) > MAX_PAIRS:
        raise TryError({"pairs": f"at most {MAX_PAIRS} pairs at a time"})
    timeout_s = settings.RUBRIC_TRY_TIMEOUT_S if timeout_s is None else timeout_s
    result = celery_app.send_task(SCORE_RUBRIC_TASK, args=[spec, pairs], kwargs={"team_id": team.pk if team else None})
    try:
        answer = result.get(timeout=timeout_s, propagate=True, disable_sync_subtasks=False)
    except CeleryTimeout:
        state, info = result.state, result.info
        # Terminate, not just revoke: a task already running (code that hangs on every pair)
        # would otherwise hold the scoring worker for up to MAX_PAIRS x its timeout.
        result.revoke(terminate=True)
        raise TryError({"detail": timeout_message(spec, state, info, timeout_s)}, 504) from None
    except Exception as exc:  # noqa: BLE001 - the task itself crashed on the worker
        raise TryError({"detail": f"scoring failed on the worker: {type(exc).__name__}: {exc}"}, 502) from None
    if "error" in answer:
        raise TryError({"pairs": answer["error"]})
    return answer


def timeout_message(spec: dict[str, Any], state: str, info: Any, timeout_s: float) -> str:
    """Why a try-it got no answer in time, as far as the studio can tell: a criterion still running
    on a worker (the task reports which), or no worker serving the scoring queue, or all of them busy."""
    waited = f"{timeout_s:.0f} s"
    running = info.get("running") if state == SCORING_STATE and isinstance(info, dict) else None
    if running:
        kinds = {c["name"]: c["kind"] for c in spec["criteria"]}
        names = ", ".join(f"{name!r} ({kinds.get(name, '?')})" for name in running)
        pairs = info.get("pairs", 0)
        return (f"criterion {names} was still running on {pairs} pair{'s' if pairs != 1 else ''} after {waited}; "
                "the studio stopped waiting and asked the worker to stop it. Try fewer or shorter pairs, or a "
                "lower time limit for that criterion")  # fmt: skip
    if state not in ("PENDING", None):
        return f"the worker had not finished scoring after {waited}; the studio stopped waiting and asked it to stop"
    return unanswered_reason(task_queue(SCORE_RUBRIC_TASK), waited)
