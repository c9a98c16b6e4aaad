"""A run's provenance, recorded when its worker starts it: the one place that sees both the studio's rows
(the experiment's dataset, rubric and environment) and the machine the run trains on.

`record` digests every data file the settings name (data.path, validation.path, a tool's documents...:
trainers.access.named, kind DATA) and copies it into the run's own folder (DATA_DIR/runs/<id>/inputs,
studio.runs.provenance.snapshot_folder) while hashing it, and returns the settings with those paths
replaced by the copies: the run trains on exactly the bytes it digested, and "Run again exactly" reads
them again however the original file changes later. Data over settings.SNAPSHOT_MAX_MB is hashed only.
A snapshot that is itself a run's input (a re-run's data) is never copied twice.

A restarted attempt keeps the first record (its inputs are pinned) and appends where it ran.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from studio.runs import provenance as studio_provenance
from studio.runs.models import Run
from trainers import provenance as facts
from trainers.access import DATA, named
from trainers.rollout.environments.catalog import VERIFIERS_VERSION

log = logging.getLogger(__name__)
RECORD_VERSION = 1


def record(run: Run, spec, devices: list[str] | None = None):
    """Record the run's provenance on it (first attempt) or this attempt's machine (later ones); returns
    the RunSpec to train with: `spec` with its data paths replaced by the snapshots."""
    run.refresh_from_db(fields=["provenance", "restarts", "worker", "placement"])
    if run.provenance:
        _note_attempt(run, devices)
        return pinned(spec, studio_provenance.snapshots(run.provenance))
    inputs = [_input(run, item.field, item.value) for item in named(spec) if item.kind == DATA]
    experiment = run.experiment
    provenance = {
        "version": RECORD_VERSION,
        "recorded_at": timezone.now().isoformat(),
        "spec": copy.deepcopy(run.spec),
        "inputs": inputs,
        "dataset": _dataset(experiment, spec),
        "rubric": _rubric(experiment, run.spec),
        "environment": _environment(experiment, run.spec),
        "model": _model(spec),
        "code": facts.code_version(),
        "packages": facts.package_versions(),
        "seeds": studio_provenance.seeds(spec.model_dump(mode="json")),
        "device": _accelerators(devices),
        "machine": {**facts.machine(), "worker": run.worker, "placement": run.placement},
    }
    Run.objects.filter(pk=run.pk).update(provenance=provenance)
    run.provenance = provenance
    return pinned(spec, studio_provenance.snapshots(provenance))


def pinned(spec, replacements: dict[str, str]):
    """`spec` (a RunSpec) with the dotted fields in `replacements` set to the snapshot paths."""
    if not replacements:
        return spec
    config = spec.model_dump(mode="json")
    for field, path in replacements.items():
        studio_provenance.set_dotted(config, field, path)
    return type(spec).model_validate(config)


def _input(run: Run, field: str, raw: str) -> dict[str, Any]:
    """One data file or folder the run reads: its digest, and the snapshot it trains on ("" with the reason
    when there is none: too large, or the copy failed)."""
    entry: dict[str, Any] = {"field": field, "path": raw, "snapshot": "", "note": ""}
    source = Path(raw).expanduser()
    try:
        if studio_provenance.snapshot_run(source) is not None:  # already a run's pinned copy: read, never copied
            return {**entry, **facts.content_digest(source).as_dict(), "snapshot": str(source.resolve())}
        limit = settings.SNAPSHOT_MAX_MB * 1024 * 1024
        if facts.size_of(source) > limit:
            note = f"larger than the snapshot limit ({settings.SNAPSHOT_MAX_MB} MB): hashed only"
            return {**entry, **facts.content_digest(source).as_dict(), "note": note}
        folder = studio_provenance.snapshot_folder(run.pk, field)
        digest, copy_path = facts.snapshot(source, folder)
        return {**entry, **digest.as_dict(), "snapshot": str(copy_path)}
    except OSError as exc:  # the run goes on from the original; the page says the inputs are not pinned
        log.warning("run %s: could not snapshot %s (%s)", run.pk, raw, exc)
        try:
            digest = facts.content_digest(source).as_dict()
        except OSError:
            digest = {"sha256": None, "bytes": None, "files": None}
        return {**entry, **digest, "note": f"not snapshotted: {type(exc).__name__}: {exc}"}


def _dataset(experiment, spec) -> dict[str, Any] | None:
    """The experiment's dataset row as it was (None for generated prompts, or a run without an experiment)."""
    if spec.data.procedural is not None:
        return {"procedural": spec.data.procedural.model_dump(mode="json")}
    dataset = experiment.dataset if experiment is not None and experiment.dataset_id else None
    if dataset is None:
        return None
    return {
        "id": dataset.pk, "name": dataset.name, "path": dataset.path, "source": dataset.source,
        "updated": dataset.updated.isoformat() if dataset.updated else None, "row_count": dataset.row_count,
    }  # fmt: skip


def _rubric(experiment, spec: dict[str, Any]) -> dict[str, Any]:
    """Rubrics have no version numbers: the digest of the definition the run carries, and the row it came
    from with its updated time (the row may have changed between launch and start: the digests tell)."""
    out: dict[str, Any] = {"sha256": facts.json_digest(spec.get("rubric"))}
    rubric = experiment.rubric if experiment is not None else None
    if rubric is not None:
        out.update(id=rubric.pk, name=rubric.name, updated=rubric.updated.isoformat() if rubric.updated else None,
                   row_sha256=facts.json_digest(rubric.spec))  # fmt: skip
    return out


def _environment(experiment, spec: dict[str, Any]) -> dict[str, Any] | None:
    if not spec.get("environment"):
        return None
    out: dict[str, Any] = {"sha256": facts.json_digest(spec["environment"]), "kind": spec["environment"].get("kind")}
    if out["kind"] == "verifiers":  # the package a run installs (its own virtual environment), pinned
        params = spec["environment"].get("params") or {}
        out["package"] = {"name": params.get("package"), "version": params.get("version"),
                          "verifiers": VERIFIERS_VERSION}  # fmt: skip
    environment = experiment.environment if experiment is not None and experiment.environment_id else None
    if environment is not None:
        out.update(id=environment.pk, name=environment.name, latest_version=environment.version,
                   version=experiment.environment_version or environment.version,
                   updated=environment.updated.isoformat() if environment.updated else None)  # fmt: skip
    return out


def _model(spec) -> dict[str, Any]:
    """The model path and, for a local folder, a listing digest (names and sizes: cheap, no weights read)
    and its config.json's digest; a hub id is named as given."""
    path = spec.model.path
    out: dict[str, Any] = {"path": path, "ref_path": spec.model.ref_path}
    folder = Path(path).expanduser()
    if folder.is_dir():
        out["listing_sha256"] = studio_provenance.listing_digest(folder)
        config = folder / "config.json"
        if config.is_file():
            out["config_sha256"] = facts.file_sha256(config)[0]
    return out


def _accelerators(devices: list[str] | None) -> dict[str, Any]:
    try:
        return facts.accelerators(devices)
    except Exception as exc:  # noqa: BLE001 - a broken CUDA install must not stop the record (nor the run here)
        return {"device": "unknown", "error": f"{type(exc).__name__}: {exc}", "leased": list(devices or [])}


def _note_attempt(run: Run, devices: list[str] | None) -> None:
    """A restarted attempt: where it ran, beside the first record (append-only)."""
    provenance = dict(run.provenance)
    attempts = list(provenance.get("later_attempts") or [])
    attempts.append({
        "attempt": run.restarts, "at": timezone.now().isoformat(), "machine": facts.machine(),
        "device": _accelerators(devices), "code": facts.code_version(), "packages": facts.package_versions(),
    })  # fmt: skip
    provenance["later_attempts"] = attempts
    Run.objects.filter(pk=run.pk).update(provenance=provenance)
    run.provenance = provenance
