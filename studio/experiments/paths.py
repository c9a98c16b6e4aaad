"""Which files a team's run may read: the paths in a RunSpec, checked for the team.

A RunSpec names files the worker opens, and experiment settings and launch or clone
overrides can set them directly, so every spec validated for a team passes here:

- data.path (and validation.path, a held-out dataset) must be one of the team's datasets, or a
  path a dataset could be registered from (studio.datasets.storage.server_path); data.split
  (validation.split) must be a name, not a path;
- a model or checkpoint path (model.path, model.ref_path, checkpoint.resume_from,
  eval.checkpoint, a local judge model) that lies inside STUDIO_DATA_DIR must lie in the
  output folder of one of the team's runs (DATA_DIR/runs/<id>, where workers write
  checkpoints) or in the demo folder. Paths outside it (a server admin's model folder,
  a hub id like "Qwen/Qwen2.5-0.5B") stay allowed.

checkpoint.output_dir is not checked: the worker replaces it with DATA_DIR/runs/<run id>.

A local model folder (a path starting with / . or ~) must also exist and hold a config.json,
but the folder is read by the worker, which may be another machine: the studio checks it only
where it sees the same files as the workers, that is under the folders workers share with it
(STUDIO_DATASET_ROOTS: the data folder and the repository by default), or anywhere when a worker
runs on this machine (an online fleet row with this host name, as `./studioctl up` starts).
Elsewhere the trainer checks it at run start with the same message. Hub ids are never looked up.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from django.conf import settings

from studio.datasets import storage
from studio.datasets.files import DatasetFileError
from studio.datasets.models import Dataset
from studio.experiments.specs import SpecError, validate
from studio.fleet.models import WorkerNode
from studio.runs.models import Run
from trainers.spec import looks_local, model_folder_error

RUNS_FOLDER = "runs"  # DATA_DIR/runs/<run id>: see workers.tasks.run_spec
MODEL_FIELDS = ("model.path", "model.ref_path", "checkpoint.resume_from", "eval.checkpoint")
# Checkpoint folders written by a LoRA run hold adapter_config.json rather than config.json.
CHECKPOINT_FIELDS = ("checkpoint.resume_from", "eval.checkpoint")
# Not paths: 'latest' is found by the trainer inside the run's own output folder.
KEYWORDS = {"checkpoint.resume_from": ("latest",)}


def validate_for_team(config: dict[str, Any], team) -> dict[str, Any]:
    """specs.validate, then `check`: the validated spec dict, or SpecError naming each bad field."""
    spec = validate(config)
    check(spec, team)
    return spec


def check(spec: dict[str, Any], team) -> None:
    """Raise SpecError naming each path of a validated spec the team may not read (a few queries)."""
    errors = {f"data.{k}": v for k, v in _dataset_errors(spec.get("data") or {}, team).items()}
    validation = spec.get("validation") or {}  # a held-out dataset is read like the training data
    if validation.get("path"):
        errors.update({f"validation.{k}": v for k, v in _dataset_errors(validation, team).items()})
    for field in MODEL_FIELDS:
        section, key = field.split(".")
        value = (spec.get(section) or {}).get(key)
        if value and value not in KEYWORDS.get(field, ()):
            error = model_path_error(value, team) or missing_folder_error(value, field in CHECKPOINT_FIELDS)
            if error:
                errors[field] = error
    errors.update({f"rubric.{k}": v for k, v in rubric_errors(spec.get("rubric") or {}, team).items()})
    if errors:
        raise SpecError(errors)


def _dataset_errors(section: dict[str, Any], team) -> dict[str, str]:
    """{"path" | "split": why} for a data section's file the team may not read, or a split that is a path."""
    errors = {}
    # No path: the prompts are generated (data.procedural), there is no file to read.
    path_error = _data_error(str(section["path"]), team) if section.get("path") is not None else None
    if path_error:
        errors["path"] = path_error
    split = str(section.get("split") or "")
    if not storage.is_split_name(split):
        errors["split"] = f"{split!r}: a split is a name (like 'train'), not a path"
    return errors


def rubric_errors(rubric: dict[str, Any], team) -> dict[str, str]:
    """{"criteria.<i>.params.model": why} for local judge models the team may not load."""
    errors = {}
    for i, criterion in enumerate(rubric.get("criteria") or []):
        params = criterion.get("params") or {}
        if criterion.get("kind") == "llm_judge" and params.get("backend") == "local" and params.get("model"):
            error = model_path_error(params["model"], team)
            if error:
                errors[f"criteria.{i}.params.model"] = error
    return errors


def _data_error(raw: str, team) -> str | None:
    resolved = _candidates(raw)
    if resolved is None:
        return f"{raw!r}: not a valid path"
    if Dataset.objects.filter(team=team, path__in=[raw, *map(str, resolved)]).exists():
        return None
    try:
        storage.server_path(raw)
    except DatasetFileError as exc:
        return f"not one of this team's datasets, and {exc}"
    return None


def model_path_error(raw: str, team) -> str | None:
    """Why the team may not load a model or checkpoint from `raw`, or None when it may."""
    resolved = _candidates(raw)
    if resolved is None:
        return f"{raw!r}: not a valid path"
    data_dir = Path(settings.DATA_DIR).resolve()
    for path in resolved:
        if not storage.inside(path, data_dir) or storage.inside(path, storage.demo_dir()):
            continue
        if not _in_team_run_folder(path.relative_to(data_dir), team):
            return (
                f"{raw}: inside the studio's data folder ({data_dir}); from there a run may read only the "
                f"checkpoints of this team's runs ({data_dir / RUNS_FOLDER}/<run id>) and the demo folder"
            )
    return None


def missing_folder_error(raw: str, adapters_ok: bool = False) -> str | None:
    """Why the local model folder `raw` cannot load ("folder X does not exist", "X has no config.json"),
    when the studio sees the workers' files there (see the module docstring); None otherwise."""
    if not looks_local(raw):
        return None  # a hub id: the worker downloads it
    resolved = _candidates(raw) or []
    if not any(_workers_see(path) for path in resolved):
        return None
    errors = [model_folder_error(str(path), adapters_ok=adapters_ok) for path in resolved]
    if any(error is None for error in errors):
        return None
    return errors[0].replace(str(resolved[0]), raw) if len(resolved) == 1 else errors[0]


def _workers_see(path: Path) -> bool:
    """Whether a worker reads `path` as this process does: a shared root, or a worker on this machine."""
    if any(storage.inside(path, Path(root)) for root in settings.DATASET_ROOTS):
        return True
    return _local_worker_online()


def _local_worker_online() -> bool:
    """An online worker on this host (Celery names nodes "queue@host"): one query."""
    host = socket.gethostname()
    return any(node.hostname.rpartition("@")[2] == host for node in WorkerNode.objects.online())


def _candidates(raw: str) -> list[Path] | None:
    """Where `raw` may point: a relative path is read against the worker's working folder, which
    the web tier cannot know, so both its own and the repository are tried. None if not a path."""
    try:
        path = Path(raw).expanduser()
        if path.is_absolute():
            return [path.resolve()]
        return [(Path.cwd() / path).resolve(), (Path(settings.BASE_DIR) / path).resolve()]
    except (ValueError, OSError, RuntimeError):  # a NUL byte, an unknown home folder
        return None


def _in_team_run_folder(relative: Path, team) -> bool:
    parts = relative.parts
    if len(parts) < 2 or parts[0] != RUNS_FOLDER or not parts[1].isdigit():
        return False
    return Run.objects.filter(pk=int(parts[1]), team=team).exists()
