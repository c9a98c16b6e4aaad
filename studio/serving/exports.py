"""Where a checkpoint's Hugging Face export may be written, and the page that asks a worker for one.

A named folder must be new, absolute, and lie under the folders the studio allows (the path policy:
settings.DATASET_ROOTS, never the studio's data folder except the team's own runs); without one the
worker writes it into the studio's exports folder with a zip the page offers for download. The export
itself is the worker's (workers.export_checkpoint): the web process never loads a model.
"""

from __future__ import annotations

from pathlib import Path

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from studio.accounts import permissions as perms
from studio.celery import EXPORT_CHECKPOINT_TASK, app
from studio.experiments import paths
from studio.fleet import queues
from studio.runs.models import Checkpoint, Run

EXPORTS_FOLDER = "exports"
MODES = {"merged": "LoRA merged into the weights (a plain model folder)", "adapter": "LoRA kept as an adapter folder"}


def download_folder(run_id: int) -> Path:
    return Path(settings.DATA_DIR) / EXPORTS_FOLDER / str(run_id)


def target_error(raw: str, team) -> str | None:
    """Why the team may not have an export written to the folder `raw`, or None."""
    path = Path(raw)
    if not path.is_absolute():
        return "give an absolute path to a new folder"
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError):
        return f"{raw!r}: not a valid path"
    if resolved.exists():
        return f"{raw} already exists: the export goes into a new folder"
    if not resolved.parent.is_dir():
        return f"{resolved.parent} is not a folder"
    policy = paths.policy_for(team)
    error = policy.error(raw, paths.MODEL)
    if error:
        return error
    if not any(resolved.is_relative_to(root) for root in policy.roots):
        roots = ", ".join(str(r) for r in policy.roots) or "none are set"
        return f"{raw}: outside the folders the studio may write to ({roots})"
    return None


@login_required
def export_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET: the form (a checkpoint step, merged or adapter, a folder or a download); POST: the export."""
    run = perms.get_for(request.user, Run.objects, run_id, perms.VIEW)
    steps = sorted(set(Checkpoint.objects.filter(run=run).values_list("step", flat=True)))
    context = {"run": run, "steps": steps, "modes": MODES, "result": None, "error": "",
               "can_edit": perms.has_role(request.user, run.team_id, perms.EDIT)}  # fmt: skip
    if request.method == "POST":
        perms.check(request.user, run, perms.EDIT)
        context["error"] = _form_error(request, run, steps)
        if not context["error"]:
            context["result"], context["error"] = _export(request, run)
        if context["result"] and context["result"].get("zip"):
            context["download"] = Path(context["result"]["zip"]).name
    status = 400 if context["error"] else 200
    return render(request, "serving/export.html", context, status=status)


def _form_error(request: HttpRequest, run: Run, steps: list[int]) -> str:
    step = request.POST.get("step", "")
    if not step.isdigit() or int(step) not in steps:
        return "step: choose one of the run's checkpoints"
    if request.POST.get("mode") not in MODES:
        return f"mode: one of {', '.join(MODES)}"
    folder = request.POST.get("folder", "").strip()
    error = target_error(folder, run.team) if folder else None
    return f"folder: {error}" if error else ""


def _export(request: HttpRequest, run: Run) -> tuple[dict | None, str]:
    args = [run.pk, int(request.POST["step"]), request.POST["mode"], request.POST.get("folder", "").strip()]
    result = app.send_task(EXPORT_CHECKPOINT_TASK, args=args)
    waited = settings.SERVING_EXPORT_TIMEOUT_S
    try:
        answer = result.get(timeout=waited)
    except CeleryTimeout:
        queue = queues.task_queue(EXPORT_CHECKPOINT_TASK)
        return None, f"the export is not done: {queues.unanswered_reason(queue, f'{waited:.0f} s')}"
    if answer.get("error"):
        return None, answer["error"]
    return answer, ""


@login_required
def export_download(request: HttpRequest, run_id: int, name: str) -> HttpResponse:
    perms.get_for(request.user, Run.objects, run_id, perms.VIEW)
    folder = download_folder(run_id)
    path = folder / name
    if not name.endswith(".zip") or "/" in name or path.parent != folder or not path.is_file():
        raise Http404("not found")
    return FileResponse(path.open("rb"), as_attachment=True, filename=f"run-{run_id}-{name}")
