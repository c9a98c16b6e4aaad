"""Which files a team's run may read, and where it may send weights and prompts: the studio's side
of the one policy (trainers.access), built from the settings and the team's own files.

Every path and endpoint a RunSpec, an environment or a rubric names (trainers.access.named finds
them: data.path, validation.path, model.path, model.ref_path, checkpoint.resume_from,
eval.checkpoint, a local judge model, a search tool's documents, a vLLM server or judge URL) is
checked for the team when it is saved or launched, and again by the worker before the run reads
anything (`policy_errors`):

- data (rows a preview or a tool result can show) must lie under STUDIO_DATASET_ROOTS, or be one
  of the team's datasets (its uploads live in the data folder);
- nothing may lie inside STUDIO_DATA_DIR but the demo folder, the team's uploads (as data), the
  output folders of the team's runs (DATA_DIR/runs/<id>, as models and checkpoints) and the data
  snapshots of its runs (DATA_DIR/runs/<id>/inputs, as data: what "Run again exactly" reads); model
  folders outside it (a server admin's, a hub id like "Qwen/Qwen2.5-0.5B") stay allowed;
- every file inside a named folder is judged by where it really lies (symbolic links followed);
- endpoints must be on STUDIO_ALLOWED_ENDPOINTS;
- data.split (validation.split) must be a name, not a path.

checkpoint.output_dir is not checked: the worker replaces it with DATA_DIR/runs/<run id>.

A local model folder (a path starting with / . or ~) must also exist and hold a config.json,
but the folder is read by the worker, which may be another machine: the studio checks it only
where it sees the same files as the workers, that is under the folders workers share with it
(STUDIO_DATASET_ROOTS: the data folder and the repository by default), or anywhere when a worker
runs on this machine (an online fleet row with this host name, as `./studioctl up` starts).
Elsewhere the trainer checks it at run start with the same message. Hub ids are never looked up:
one is refused only where the Hub is switched off here (HF_HUB_OFFLINE, which the workers `up`
starts share) and the model is not in the Hub cache (trainers.models.hub.save_problem); the form says
beside it that the worker downloads it (`model_source_note`).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from pydantic import BaseModel, ValidationError

from studio.datasets import places
from studio.datasets.models import Dataset
from studio.experiments.specs import SpecError, validate
from studio.fleet.models import WorkerNode
from studio.runs.models import Run
from trainers.access import DATA, ENDPOINT, MODEL, Named, PathPolicy, endpoint_error, named
from trainers.models import hub
from trainers.spec import EnvironmentSpec, RubricSpec, RunSpec, looks_local, model_folder_error, model_path_shape_error

RUNS_FOLDER = "runs"  # DATA_DIR/runs/<run id>: see workers.tasks.run_spec
INPUTS_FOLDER = "inputs"  # DATA_DIR/runs/<run id>/inputs: the data a run trained on, snapshotted (workers.provenance)
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
    """Raise SpecError naming each path or endpoint of a validated spec the team may not use (a few queries)."""
    errors = policy_errors(spec, team)
    for section in ("data", "validation"):
        split = str((spec.get(section) or {}).get("split") or "")
        if spec.get(section) and not places.is_split_name(split):
            errors.setdefault(f"{section}.split", f"{split!r}: a split is a name (like 'train'), not a path")
    for field in MODEL_FIELDS:
        section, key = field.split(".")
        value = (spec.get(section) or {}).get(key)
        if value and value not in KEYWORDS.get(field, ()) and field not in errors:
            error = missing_folder_error(value, field in CHECKPOINT_FIELDS) or hub_error(value)
            if error:
                errors[field] = error
    if errors:
        raise SpecError(errors)


def refuse(errors: dict[str, str], what: str = "the run's settings") -> None:
    """SpecError saying the policy refused `errors` ({field: why}), for a worker that checks before it reads."""
    if errors:
        raise SpecError({k: f"{v} (refused by the worker before reading {what})" for k, v in errors.items()})


def policy_errors(spec: dict[str, Any], team) -> dict[str, str]:
    """{field: why} for every path and endpoint a RunSpec dict names that the policy refuses the team:
    what the studio checks on launch and the worker again before the run reads anything."""
    return named_errors(_section(RunSpec, spec), team)


def environment_errors(config: dict[str, Any], team) -> dict[str, str]:
    """{"params.tools.0.params.dataset": why, ...} for an environment config's paths the team may not read."""
    return named_errors(_section(EnvironmentSpec, config), team)


def rubric_errors(rubric: dict[str, Any], team) -> dict[str, str]:
    """{"criteria.<i>.params.model" | "...base_url": why} for judge models and endpoints the team may not use."""
    return named_errors(_section(RubricSpec, rubric), team)


def named_errors(section: BaseModel | None, team) -> dict[str, str]:
    if section is None:
        return {}
    policy, errors = policy_for(team), {}
    for item in named(section):
        error = target_error(item, policy)
        if error:
            errors[item.field] = error
    return errors


def target_error(item: Named, policy: PathPolicy) -> str | None:
    if item.kind == ENDPOINT:
        return endpoint_error(item.value, settings.ALLOWED_ENDPOINTS)
    if item.kind == DATA:
        error = policy.error(item.value, DATA)
        return f"not one of this team's datasets, and {error}" if error else None
    return _model_error(item.value, policy)


def _section(model: type[BaseModel], value: Any) -> BaseModel | None:
    """The settings as their model; None when they do not validate (the schema's errors say why)."""
    try:
        return model.model_validate(value) if isinstance(value, dict) else None
    except (ValidationError, ValueError):
        return None


def policy_for(team=None) -> PathPolicy:
    """The path policy for `team` (None: no team's own files, only the demo folder inside the data folder)."""
    data_dir = Path(settings.DATA_DIR).resolve()
    why = (
        f"the studio's data folder ({data_dir}), which holds its secrets and every team's files; from there a run "
        f"may read only this team's uploaded datasets, the checkpoints of its runs ({data_dir / RUNS_FOLDER}/<run id>) "
        "and the demo folder"
    )
    return PathPolicy(roots=tuple(Path(r) for r in settings.DATASET_ROOTS), forbidden={data_dir: why},
                      allowed_inside=_TeamFiles(team, data_dir))  # fmt: skip


class _TeamFiles:
    """Whether a path inside the data folder is the demo's or this team's own: its uploads (as data)
    or its runs' outputs (as models); the team's rows are read once, when first needed."""

    def __init__(self, team, data_dir: Path) -> None:
        self.team, self.data_dir = team, data_dir
        self._runs: set[int] | None = None
        self._uploads: list[Path] | None = None

    def __call__(self, path: Path, kind: str) -> bool:
        if places.inside(path, places.demo_dir()):
            return True
        if self.team is None:
            return False
        parts = path.relative_to(self.data_dir).parts
        own_run = len(parts) >= 2 and parts[0] == RUNS_FOLDER and parts[1].isdigit() and int(parts[1]) in self.runs()
        if kind == DATA:
            # Its uploads, and the data its runs trained on as the worker snapshotted it (DATA_DIR/runs/<id>/inputs:
            # workers.provenance), which "Run again exactly" trains on again.
            snapshot = own_run and len(parts) >= 3 and parts[2] == INPUTS_FOLDER
            return snapshot or any(places.inside(path, upload) for upload in self.uploads())
        return own_run

    def runs(self) -> set[int]:
        if self._runs is None:
            self._runs = set(Run.objects.filter(team=self.team).values_list("pk", flat=True))
        return self._runs

    def uploads(self) -> list[Path]:
        if self._uploads is None:
            paths = Dataset.objects.filter(team=self.team).values_list("path", flat=True)
            resolved = (_resolved(p) for p in paths if p)
            self._uploads = [p for p in resolved if p is not None and places.inside(p, self.data_dir)]
        return self._uploads


def _resolved(raw: str) -> Path | None:
    try:
        return Path(raw).resolve()
    except (ValueError, OSError, RuntimeError):
        return None


def model_path_error(raw: str, team) -> str | None:
    """Why the team may not load a model or checkpoint from `raw`, or None when it may."""
    return _model_error(raw, policy_for(team))


def _model_error(raw: str, policy: PathPolicy) -> str | None:
    """A hub id passes; a folder path is checked where a worker may read it (its working folder or
    the repository: the web tier cannot know which), file by file."""
    if not looks_local(raw):
        return None
    relative = not raw.startswith(("/", "~"))
    for base in dict.fromkeys((Path.cwd(), Path(settings.BASE_DIR)) if relative else (Path.cwd(),)):
        error = policy.error(raw, MODEL, base)
        if error:
            return error
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


def hub_error(raw: str) -> str | None:
    """Why runs could not get the hub model `raw` (the Hub switched off here, the model not cached), or None
    (also for a folder path)."""
    return None if looks_local(raw) else hub.save_problem(raw)


def model_source_note(raw: str) -> str:
    """What the form says beside a model path that is a hub id (the worker downloads it); "" for a folder."""
    if not raw or looks_local(raw) or model_path_shape_error(raw):
        return ""
    return hub.source_note(raw)


def _workers_see(path: Path) -> bool:
    """Whether a worker reads `path` as this process does: a shared root, or a worker on this machine."""
    if any(places.inside(path, Path(root)) for root in settings.DATASET_ROOTS):
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
