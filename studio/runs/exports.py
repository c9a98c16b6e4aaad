"""A run's settings as other trainers' configs (trainers.exports), for the run page and the API."""

from __future__ import annotations

from pydantic import ValidationError

from studio.lib.errors import Conflict
from studio.runs.models import Run
from trainers.exports import Export, to_trl, to_verl
from trainers.spec import RunSpec

TARGETS = {"trl": to_trl, "verl": to_verl}


class ExportError(Conflict, ValueError):
    """The run's stored settings no longer validate (saved by an older schema): nothing to export (409)."""


def spec_as_run(run: Run) -> dict:
    """The settings as the run's first attempt got them (an automatic restart rewrites run.spec's
    checkpoint.resume_from), else the run's stored settings."""
    return (run.provenance or {}).get("spec") or run.spec


def export(run: Run, target: str) -> Export:
    """The run's settings as `target` ("trl" or "verl"). ExportError if they no longer validate."""
    try:
        spec = RunSpec.model_validate(spec_as_run(run))
    except ValidationError as exc:
        raise ExportError(
            f"the run's settings no longer validate, so they cannot be exported: {exc.errors()[0]['msg']}"
        ) from None
    return TARGETS[target](spec, title=f"Run #{run.pk} {run.name!r}")


def losses(run: Run) -> dict:
    """{target: what its export loses (unmapped settings, approximations)}. ExportError if the settings
    no longer validate."""
    return {target: export(run, target).losses() for target in TARGETS}
