"""A run's provenance as the studio reads it: where its data snapshots live, what the run page shows,
and what differs between two records (a run and its exact re-run) or between a record and now.

The record itself is written by the worker (workers.provenance), which alone sees the machine; this
module imports no torch and no worker code. "Run again exactly" is studio.runs.lifecycle.rerun_exactly,
which builds its settings with `pinned_spec` and its warnings with `changed_since`.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from studio.experiments.paths import INPUTS_FOLDER, RUNS_FOLDER
from studio.runs.models import Run
from trainers import provenance as facts

# The packages a page names (the record holds more); a difference in any recorded one is reported.
SHOWN_PACKAGES = ("torch", "transformers", "vllm", facts.PROJECT)
# An original data file up to this size is hashed again when a re-run is launched, to say whether it
# changed since; a larger one is compared by size only (the re-run reads the snapshot either way).
REHASH_MAX_BYTES = 64 * 1024 * 1024


def snapshot_folder(run_id: int, field: str) -> Path:
    """Where the worker copies the data a run reads from `field` (data.path -> .../inputs/data.path/)."""
    return Path(settings.DATA_DIR).resolve() / RUNS_FOLDER / str(run_id) / INPUTS_FOLDER / field


def snapshot_run(path: str | Path) -> int | None:
    """The run whose snapshot `path` lies in (DATA_DIR/runs/<id>/inputs/...), or None."""
    try:
        relative = Path(path).expanduser().resolve().relative_to(Path(settings.DATA_DIR).resolve())
    except (ValueError, OSError, RuntimeError):
        return None
    parts = relative.parts
    if len(parts) >= 4 and parts[0] == RUNS_FOLDER and parts[1].isdigit() and parts[2] == INPUTS_FOLDER:
        return int(parts[1])
    return None


def snapshots(provenance: dict[str, Any]) -> dict[str, str]:
    """{dotted field: snapshot path} for each input the record pinned with a copy."""
    return {item["field"]: item["snapshot"] for item in provenance.get("inputs") or [] if item.get("snapshot")}


def set_dotted(config: Any, field: str, value: Any) -> None:
    """Set `field` ("environment.params.tools.0.params.dataset") inside nested dicts and lists."""
    *parents, last = field.split(".")
    node = config
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def listing_digest(folder: Path) -> str:
    """sha256 of a folder's file names and sizes (no contents read): a cheap sign a model folder changed."""
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(folder).as_posix()}\t{file.stat().st_size}\n".encode())
    return digest.hexdigest()


def seeds(spec: dict[str, Any], prefix: str = "") -> dict[str, int]:
    """Every seed a RunSpec dict sets ({"optim.seed": 0, "validation.holdout_seed": 0, ...})."""
    found: dict[str, int] = {}
    for key, value in (spec or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(seeds(value, f"{name}."))
        elif (key == "seed" or key.endswith("_seed")) and isinstance(value, int) and not isinstance(value, bool):
            found[name] = value
    return found


def pinned_spec(run: Run) -> tuple[dict[str, Any], list[str]]:
    """The settings of an exact re-run: the spec as the run's first attempt got it, each data path replaced
    by its snapshot; and what is not pinned (inputs without a snapshot). ValueError when a snapshot is gone."""
    record = run.provenance or {}
    spec = copy.deepcopy(record.get("spec") or run.spec)
    unpinned = []
    for item in record.get("inputs") or []:
        field, snapshot = item.get("field"), item.get("snapshot")
        if snapshot:
            if not Path(snapshot).exists():
                raise ValueError(
                    f"the snapshot of {field} ({snapshot}) is gone: the bytes the run read cannot be read again"
                )
            set_dotted(spec, field, snapshot)
        else:
            why = item.get("note") or "no snapshot"
            unpinned.append(f"{field} is not pinned ({why}): the re-run reads {item.get('path')} as it is now")
    return spec, unpinned


def changed_since(run: Run) -> list[str]:
    """What differs now from what the run recorded, as the studio can tell before a worker takes the re-run:
    the data files at their original paths, the dataset, rubric and environment rows, and the code and
    packages installed beside the studio (the worker records its own when the re-run starts, and the re-run's
    page compares both records)."""
    record = run.provenance or {}
    notes = []
    for item in record.get("inputs") or []:
        if note := _input_changed(item):
            notes.append(note)
    notes.extend(_rows_changed(run, record))
    code, now = record.get("code") or {}, facts.code_version()
    if code.get("commit") and now.get("commit") and code["commit"] != now["commit"]:
        notes.append(f"code: the run ran commit {code['commit'][:12]}; the studio's checkout is now at "
                     f"{now['commit'][:12]}")  # fmt: skip
    elif code.get("version") != now.get("version"):
        notes.append(f"project version: {code.get('version')} then, {now.get('version')} now")
    elif now.get("diff_sha256") != code.get("diff_sha256"):
        notes.append("code: the studio's checkout has other uncommitted changes than the run's")
    recorded = record.get("packages") or {}
    current = facts.package_versions()
    for name in sorted(set(recorded) | set(current)):
        if name != facts.PROJECT and recorded.get(name) != current.get(name):
            notes.append(f"{name}: {recorded.get(name) or 'not installed'} then, {current.get(name) or 'not installed'} "
                         "now (installed beside the studio)")  # fmt: skip
    return notes


def _input_changed(item: dict[str, Any]) -> str | None:
    field, path = item.get("field"), Path(str(item.get("path") or "")).expanduser()
    if snapshot_run(path) is not None:
        return None  # itself a snapshot: never changes
    pinned = "; the re-run reads the snapshot the run trained on" if item.get("snapshot") else ""
    if not path.exists():
        return f"{field}: {item.get('path')} is gone{pinned}"
    try:
        size = facts.size_of(path)
        if size != item.get("bytes"):
            return f"{field}: {item.get('path')} changed since (now {size:,} bytes, then {item.get('bytes') or 0:,}){pinned}"
        if size <= REHASH_MAX_BYTES and facts.content_digest(path).sha256 != item.get("sha256"):
            return f"{field}: {item.get('path')} changed since (same size, other bytes){pinned}"
    except OSError as exc:
        return f"{field}: {item.get('path')} cannot be read now ({exc}){pinned}"
    return None


def _rows_changed(run: Run, record: dict[str, Any]) -> list[str]:
    """The dataset, rubric and environment rows edited since the record (the re-run uses them as they were)."""
    notes = []
    experiment = run.experiment
    dataset = record.get("dataset") or {}
    if experiment is not None and experiment.dataset_id and dataset.get("id") == experiment.dataset_id:
        updated = experiment.dataset.updated
        if updated and dataset.get("updated") and updated > datetime.fromisoformat(dataset["updated"]):
            notes.append(f"dataset {experiment.dataset.name!r} was edited since ({updated:%Y-%m-%d %H:%M})")
    rubric = record.get("rubric") or {}
    same_rubric = experiment is not None and rubric.get("id") == experiment.rubric_id
    if same_rubric and _rubric_row_changed(experiment.rubric, rubric):
        notes.append(f"rubric {experiment.rubric.name!r} was changed since; the re-run scores with the "
                     "definition the run used")  # fmt: skip
    environment = record.get("environment") or {}
    if experiment is not None and experiment.environment_id and environment.get("id") == experiment.environment_id:
        latest = experiment.environment.version
        if environment.get("version") and latest != environment["version"]:
            notes.append(f"environment {experiment.environment.name!r} is at version {latest} now; the re-run uses "
                         f"version {environment['version']} as the run did")  # fmt: skip
    return notes


def _rubric_row_changed(row, recorded: dict[str, Any]) -> bool:
    """Whether the rubric row differs from the one the run was recorded with. Its definition is compared with
    the row's own digest then (`row_sha256`), not with the run's rubric section (`sha256`), which the run's
    settings hold validated, defaults filled in: those two differ for a rubric nobody touched. A record from
    before `row_sha256` compares the row's updated time (equal: unchanged)."""
    if recorded.get("row_sha256"):
        return facts.json_digest(row.spec) != recorded["row_sha256"]
    then = recorded.get("updated")
    return bool(row.updated and then and row.updated > datetime.fromisoformat(then))


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two records (a run, and its exact re-run once it started), in words."""
    if not before or not after:
        return []
    notes = []
    inputs_before = {i.get("field"): i for i in before.get("inputs") or []}
    for item in after.get("inputs") or []:
        old = inputs_before.get(item.get("field"))
        if old is not None and old.get("sha256") != item.get("sha256"):
            notes.append(
                f"{item.get('field')}: other bytes ({_short(old.get('sha256'))} then, {_short(item.get('sha256'))} now)"
            )
    for section in ("rubric", "environment"):
        a, b = before.get(section) or {}, after.get(section) or {}
        if a.get("sha256") != b.get("sha256"):
            notes.append(f"{section}: other definition ({_short(a.get('sha256'))} then, {_short(b.get('sha256'))} now)")
    for key in ("listing_sha256", "config_sha256"):
        a, b = (before.get("model") or {}).get(key), (after.get("model") or {}).get(key)
        if a != b:
            notes.append(f"model folder: {'files' if key == 'listing_sha256' else 'config.json'} differ")
            break
    code_a, code_b = before.get("code") or {}, after.get("code") or {}
    if code_a.get("commit") != code_b.get("commit"):
        notes.append(f"code: commit {_short(code_a.get('commit'))} then, {_short(code_b.get('commit'))} now")
    elif code_a.get("diff_sha256") != code_b.get("diff_sha256"):
        notes.append("code: the same commit with other uncommitted changes")
    packages_a, packages_b = before.get("packages") or {}, after.get("packages") or {}
    for name in sorted(set(packages_a) | set(packages_b)):
        if packages_a.get(name) != packages_b.get(name):
            notes.append(
                f"{name}: {packages_a.get(name) or 'not installed'} then, {packages_b.get(name) or 'not installed'} now"
            )
    device_a, device_b = before.get("device") or {}, after.get("device") or {}
    for key in ("device", "gpus", "cuda", "deterministic_algorithms"):
        if device_a.get(key) != device_b.get(key):
            notes.append(f"device {key}: {device_a.get(key)} then, {device_b.get(key)} now")
    machine_a, machine_b = before.get("machine") or {}, after.get("machine") or {}
    if machine_a.get("cpu") != machine_b.get("cpu"):
        notes.append(f"CPU: {machine_a.get('cpu')} then, {machine_b.get('cpu')} now")
    if (before.get("seeds") or {}) != (after.get("seeds") or {}):
        notes.append(f"seeds: {before.get('seeds')} then, {after.get('seeds')} now")
    return notes


def _short(digest: Any) -> str:
    return str(digest)[:12] if digest else "none"


def summary(run: Run) -> dict[str, Any] | None:
    """What the run page's Provenance section shows (None before the worker recorded it)."""
    record = run.provenance or {}
    if not record:
        return None
    code = record.get("code") or {}
    packages = record.get("packages") or {}
    device = record.get("device") or {}
    machine = record.get("machine") or {}
    inputs = [
        {
            "field": item.get("field"), "path": item.get("path"), "sha256": item.get("sha256"),
            "short": _short(item.get("sha256")), "bytes": item.get("bytes"), "files": item.get("files"),
            "pinned": bool(item.get("snapshot")), "note": item.get("note") or "",
        }
        for item in record.get("inputs") or []
    ]  # fmt: skip
    rubric, environment = record.get("rubric") or {}, record.get("environment") or None
    return {
        "recorded_at": record.get("recorded_at"),
        "code": {
            "commit": code.get("commit"),
            "short": _short(code.get("commit")) if code.get("commit") else None,
            "dirty": code.get("dirty"),
            "version": code.get("version"),
        },  # fmt: skip
        "packages": {name: packages.get(name) for name in ("python", *SHOWN_PACKAGES)},
        "inputs": inputs,
        "dataset": record.get("dataset"),
        "rubric": {**rubric, "short": _short(rubric.get("sha256"))},
        "environment": {**environment, "short": _short(environment.get("sha256"))} if environment else None,
        "model": record.get("model") or {},
        "seeds": record.get("seeds") or {},
        "device": device.get("device"),
        "gpus": device.get("gpus") or [],
        "hostname": machine.get("hostname"),
        "cpu": machine.get("cpu"),
        "later_attempts": len(record.get("later_attempts") or []),
    }


def repeat_differences(run: Run) -> dict[str, Any] | None:
    """For an exact re-run: the run it repeats and what differs between the two records (empty list: nothing
    recorded differs), or None when it repeats none. `pending` while the re-run's worker has not recorded yet."""
    source = run.repeat_of
    if source is None:
        return None
    return {"id": source.pk, "name": source.name, "pending": not run.provenance,
            "differences": differences(source.provenance or {}, run.provenance or {})}  # fmt: skip
