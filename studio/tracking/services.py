"""Tracker actions the API and the pages share: setting secrets, validating and saving mirror
settings (a team's defaults, an experiment's own), and the settings a run mirrors with.

A secret is bound to the server it was set for (TrackerSecret.endpoint): settings that would send it
elsewhere are refused, the worker asks `secret_for` with the server it is about to send to, and moving a
mirror to another server is an owner's action that clears the secrets bound to the old one."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from pydantic import ValidationError

from studio.accounts import permissions as perms
from studio.accounts.models import Team
from studio.lib.errors import FieldErrors
from studio.tracking import secrets
from studio.tracking.models import ExperimentMirror, MirrorDefaults, MirrorStatus, TrackerSecret
from studio.tracking.schema import (
    SECRET_FIELDS,
    TRACKERS,
    URL_FIELDS,
    WANDB_SERVER,
    MirrorSettings,
    endpoints,
    secret_destination,
)
from trainers.access import Refused, bound_to, endpoint_base, endpoint_error


class TrackingError(FieldErrors, ValueError):
    """Settings or a secret the studio refuses; `errors` maps a field ("wandb.api_key_secret") to why,
    answered as a serializer's errors (400 {field: [why]})."""

    listed = True


class MoveRefused(PermissionError):
    """An editor pointing a mirror at another server: where a team's secrets may go is its owners' call."""


@dataclass
class Saved:
    """Settings saved, and the secret fields the save cleared ({"mlflow.secret": why}): those named a
    secret bound to the server a tracker moved away from."""

    settings: MirrorSettings
    cleared: dict[str, str] = dataclass_field(default_factory=dict)


def set_secret(team: Team, name: str, kind: str, value: str, user=None, endpoint: str = "") -> TrackerSecret:
    """Create or replace the team's secret `name` (its value encrypted; the kind must stay the same),
    bound to `endpoint`, the server it may be sent to (W&B's own server when a W&B key names none)."""
    errors = {}
    if kind not in TRACKERS:
        errors["kind"] = f"must be one of {', '.join(TRACKERS)}"
    server = (endpoint or "").strip() or (WANDB_SERVER if kind == "wandb" else "")
    if not server:
        errors["endpoint"] = "required: the server this secret may be sent to (the tracker's URL)"
    elif _refusal(server):
        errors["endpoint"] = _refusal(server)
    if not isinstance(value, str) or not value.strip():
        errors["value"] = "must be a non-empty string"
    elif len(value) > secrets.MAX_SECRET_CHARS:
        errors["value"] = f"at most {secrets.MAX_SECRET_CHARS} characters"
    existing = TrackerSecret.objects.filter(team=team, name=name).first()
    if existing is not None and existing.kind != kind:
        errors["kind"] = f"the secret {name!r} is a {existing.kind} secret; delete it to reuse the name"
    if errors:
        raise TrackingError(errors)
    secret = existing or TrackerSecret(team=team, name=name, kind=kind, created_by=user)
    secret.full_clean(exclude=["ciphertext", "team", "created_by"])
    secret.ciphertext = secrets.encrypt(value.strip())
    secret.endpoint = endpoint_base(server)
    secret.save()
    return secret


def _refusal(url: str) -> str | None:
    """Why a tracker's server is refused (not on STUDIO_TRACKER_ENDPOINTS), or None."""
    refused = endpoint_error(url, django_settings.TRACKER_ENDPOINTS)
    return refused.replace("STUDIO_ALLOWED_ENDPOINTS", "STUDIO_TRACKER_ENDPOINTS") if refused else None


def validate(data: Any, team: Team) -> MirrorSettings:
    """The settings as a MirrorSettings, or TrackingError naming each bad field: the schema, then for
    each tracker switched on its server (on STUDIO_TRACKER_ENDPOINTS) and the team secret it names."""
    try:
        parsed = MirrorSettings.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise TrackingError(
            {".".join(str(p) for p in e["loc"]) or "settings": e["msg"] for e in exc.errors()}
        ) from None
    errors: dict[str, str] = {}
    stored = {name: (kind, bound) for name, kind, bound in
              TrackerSecret.objects.filter(team=team).values_list("name", "kind", "endpoint")}  # fmt: skip
    kinds = {name: kind for name, (kind, _) in stored.items()}
    for tracker in parsed.enabled():
        section = getattr(parsed, tracker)
        url = getattr(section, URL_FIELDS[tracker])
        if url and _refusal(url):
            errors[f"{tracker}.{URL_FIELDS[tracker]}"] = _refusal(url)
        secret_field = SECRET_FIELDS[tracker]
        secret_name = getattr(section, secret_field)
        if secret_name and kinds.get(secret_name) != tracker:
            errors[f"{tracker}.{secret_field}"] = (
                f"the team has no {tracker} secret named {secret_name!r}"
                if secret_name not in kinds
                else f"{secret_name!r} is a {kinds[secret_name]} secret, not a {tracker} one"
            )
        elif secret_name:
            refused = _not_bound(secret_name, stored[secret_name][1], secret_destination(tracker, section))
            if refused:
                errors[f"{tracker}.{secret_field}"] = refused
        for field, why in _needs(tracker, section).items():
            errors.setdefault(f"{tracker}.{field}", why)
    if errors:
        raise TrackingError(errors)
    return parsed


def _needs(tracker: str, section) -> dict[str, str]:
    """What a tracker switched on cannot do without."""
    if tracker == "mlflow":
        missing = {} if section.tracking_uri else {"tracking_uri": "required to mirror to MLflow"}
        if section.auth != "none" and not section.secret:
            missing["secret"] = f"required with auth {section.auth!r}"
        return missing
    if tracker == "wandb" and section.mode == "online" and not section.api_key_secret:
        return {"api_key_secret": "required in online mode (offline mode writes files on the worker only)"}
    if tracker == "trackio" and section.server_url and not section.write_token_secret:
        return {"write_token_secret": "required with a server_url"}
    return {}


def team_defaults(team: Team) -> MirrorSettings:
    row = MirrorDefaults.objects.filter(team=team).first()
    return MirrorSettings.model_validate(row.settings) if row else MirrorSettings()


def _not_bound(name: str, bound: str, destination: str | None) -> str | None:
    """Why the secret `name` (bound to `bound`) may not go to `destination`, or None (None too where
    the section sends its secret nowhere)."""
    if destination is None or bound_to(destination, bound):
        return None
    if not bound:
        return f"the secret {name!r} is bound to no server (it was set before secrets were): an owner sets it again"
    return (f"the secret {name!r} was set for {bound} and is sent there only, not to {destination}: an owner sets "
            f"a secret for this server")  # fmt: skip


def _moved(before: MirrorSettings, after: MirrorSettings) -> list[str]:
    """The trackers whose server differs (as set, switched on or not), e.g. ["mlflow.tracking_uri"]."""
    old, new = endpoints(before), endpoints(after)
    return [f"{t}.{URL_FIELDS[t]}" for t in TRACKERS if _same_server(old[t], new[t]) is False]


def _same_server(a: str, b: str) -> bool:
    try:
        return endpoint_base(a) == endpoint_base(b) if a and b else a == b
    except Refused:
        return a == b


def _clear_moved(data: Any, before: MirrorSettings, team: Team) -> tuple[Any, dict[str, str]]:
    """`data` with each moved tracker's secret cleared where that secret is not bound to the new server
    (MLflow's auth set to none with it; W&B online and a Trackio server, which cannot go without one, are
    switched off), and {field: why} for each cleared. Data the schema refuses is left for validate."""
    try:
        after = MirrorSettings.model_validate(data if data is not None else {})
    except ValidationError:
        return data, {}
    bound = dict(TrackerSecret.objects.filter(team=team).values_list("name", "endpoint"))
    cleared: dict[str, str] = {}
    for moved in _moved(before, after):
        tracker = moved.split(".")[0]
        section = getattr(after, tracker)
        secret_field = SECRET_FIELDS[tracker]
        name = getattr(section, secret_field)
        destination = secret_destination(tracker, section) or getattr(section, URL_FIELDS[tracker])
        if not name or (name in bound and destination and bound_to(destination, bound[name])):
            continue
        setattr(section, secret_field, "")
        why = f"{name!r} was bound to the server {tracker} moved away from; set a secret for the new one"
        if tracker == "mlflow":
            section.auth = "none"
        elif tracker in ("wandb", "trackio") and section.enabled and secret_destination(tracker, section):
            section.enabled = False
            why += f", then switch {tracker} on again"
        cleared[f"{tracker}.{secret_field}"] = why
    return after.model_dump(), cleared


def save_team_defaults(team: Team, data: Any) -> Saved:
    """Save the team's defaults (owners: the caller checks); a tracker moved to another server loses the
    secret bound to the old one (Saved.cleared)."""
    data, cleared = _clear_moved(data, team_defaults(team), team)
    parsed = validate(data, team)
    MirrorDefaults.objects.update_or_create(team=team, defaults={"settings": parsed.model_dump()})
    return Saved(parsed, cleared)


def experiment_settings(experiment) -> tuple[bool, MirrorSettings]:
    """(inherit, the settings its runs use): the team's defaults while it inherits them."""
    row = ExperimentMirror.objects.filter(experiment=experiment).first()
    if row is None or row.inherit:
        return True, team_defaults(experiment.team)
    return False, MirrorSettings.model_validate(row.settings)


def save_experiment_settings(experiment, inherit: bool, data: Any = None, user=None) -> Saved:
    """Save an experiment's own settings (or go back to the team's defaults). Pointing a tracker at
    another server than it has now is an owner's action (MoveRefused for anyone else: `user` None is
    the studio itself), and clears the secrets bound to the old server (Saved.cleared). Going back to
    the defaults is open to editors: those servers are the owners' choice."""
    if inherit:
        parsed, cleared = team_defaults(experiment.team), {}
    else:
        _, before = experiment_settings(experiment)
        try:
            moved = _moved(before, MirrorSettings.model_validate(data if data is not None else {}))
        except ValidationError:
            moved = []  # validate names what the schema refuses
        if moved and user is not None and not perms.has_role(user, experiment.team_id, perms.MANAGE):
            raise MoveRefused(
                f"changing where this experiment's mirror sends ({', '.join(moved)}) is an owner's action: the "
                f"team's secrets go to the servers its owners chose; ask an owner of {experiment.team.name}"
            )
        data, cleared = _clear_moved(data, before, experiment.team)
        parsed = validate(data, experiment.team)
    ExperimentMirror.objects.update_or_create(
        experiment=experiment, defaults={"inherit": inherit, "settings": {} if inherit else parsed.model_dump()}
    )
    return Saved(parsed, cleared)


def settings_for_run(run) -> MirrorSettings:
    """What a run mirrors: its experiment's settings (or the team's defaults); the team's defaults for
    a run without an experiment. Validated again (a secret may have been deleted since)."""
    if run.experiment_id:
        _, parsed = experiment_settings(run.experiment)
    else:
        parsed = team_defaults(run.team)
    return validate(parsed.model_dump(), run.team)


def secret_value(team_id: int, name: str) -> str:
    """The decrypted value of a team secret, wherever it is bound: never for a page or the API (the
    worker asks `secret_for`, which checks where it goes)."""
    secret = TrackerSecret.objects.filter(team_id=team_id, name=name).first()
    if secret is None:
        raise TrackingError({name: "no such team secret"})
    return secrets.decrypt(secret.ciphertext)


def secret_for(team_id: int, name: str, destination: str) -> str:
    """The decrypted value of a team secret, for sending to `destination` now: TrackingError unless the
    secret is bound to that server. The worker's mirror asks right before it hands the value to a
    tracker's client, so a binding changed since the settings were saved holds too."""
    secret = TrackerSecret.objects.filter(team_id=team_id, name=name).first()
    if secret is None:
        raise TrackingError({name: "no such team secret"})
    refused = _not_bound(name, secret.endpoint, destination)
    if refused:
        raise TrackingError({name: refused + " (not sent)"})
    return secrets.decrypt(secret.ciphertext)


def record_status(run_id: int, tracker: str, **fields: Any) -> None:
    """Write a run's mirror status for one tracker (the worker's mirror thread calls this)."""
    with transaction.atomic():
        MirrorStatus.objects.update_or_create(run_id=run_id, tracker=tracker, defaults=fields)


def statuses(run) -> list[dict[str, Any]]:
    return [row.summary() for row in MirrorStatus.objects.filter(run=run)]
