"""What a run mirrors and where: one section per tracker, validated here and by the worker.

Credentials never appear in these settings: a section names a team secret (`*_secret`, a
studio.tracking.models.TrackerSecret of the tracker's kind), whose value only the worker's mirror reads.
Imports neither torch nor the trackers' clients, so the web tier validates and renders it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"  # a project / experiment / secret name
WANDB_SERVER = "https://api.wandb.ai"


class TrackerSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(False, description="Mirror runs to this tracker.")


class WandbSection(TrackerSection):
    project: str = Field("rollout-studio", pattern=NAME_PATTERN, description="W&B project.")
    entity: str = Field(
        "", pattern=r"^$|" + NAME_PATTERN, description="W&B entity (user or team); empty: the key's default."
    )
    mode: Literal["online", "offline"] = Field(
        "online",
        description="online: send to the W&B server; offline: write run files on the worker (`wandb sync` later).",
    )
    base_url: str = Field(WANDB_SERVER, max_length=500, description="W&B server (a self-hosted one's URL).")
    api_key_secret: str = Field("", pattern=r"^$|" + NAME_PATTERN, description="Team secret holding the API key.")


class MlflowSection(TrackerSection):
    tracking_uri: str = Field("", max_length=500, description="MLflow tracking server, http(s)://host:port.")
    experiment: str = Field("rollout-studio", pattern=NAME_PATTERN, description="MLflow experiment name.")
    auth: Literal["none", "token", "basic"] = Field(
        "none", description="token: the secret is a bearer token; basic: the secret is user:password."
    )
    secret: str = Field("", pattern=r"^$|" + NAME_PATTERN, description="Team secret with the token or user:password.")


class TrackioSection(TrackerSection):
    project: str = Field("rollout-studio", pattern=NAME_PATTERN, description="Trackio project.")
    server_url: str = Field(
        "", max_length=500, description="A self-hosted Trackio server; empty: the worker's local Trackio store."
    )
    write_token_secret: str = Field(
        "", pattern=r"^$|" + NAME_PATTERN, description="Team secret with the server's write token."
    )


class MirrorSettings(BaseModel):
    """A team's default or an experiment's mirror settings."""

    model_config = ConfigDict(extra="forbid")
    trackio: TrackioSection = Field(default_factory=TrackioSection)
    wandb: WandbSection = Field(default_factory=WandbSection)
    mlflow: MlflowSection = Field(default_factory=MlflowSection)
    rollouts_per_step: int = Field(
        8, ge=0, le=256, description="Rollouts sent per step (the first of each group first)."
    )
    max_text_chars: int = Field(
        4000, ge=100, le=100_000, description="A prompt or completion is cut to this many characters."
    )

    def enabled(self) -> list[str]:
        """The trackers switched on, in a fixed order."""
        return [name for name in TRACKERS if getattr(self, name).enabled]


TRACKERS = ("trackio", "wandb", "mlflow")
SECRET_FIELDS = {"trackio": "write_token_secret", "wandb": "api_key_secret", "mlflow": "secret"}
URL_FIELDS = {"trackio": "server_url", "wandb": "base_url", "mlflow": "tracking_uri"}


def secret_destination(tracker: str, section: TrackerSection) -> str | None:
    """The server a tracker section sends its secret to, or None where the secret goes nowhere (W&B
    offline writes files; Trackio without a server_url writes the worker's local store)."""
    if tracker == "wandb" and section.mode == "offline":  # type: ignore[attr-defined]
        return None
    return getattr(section, URL_FIELDS[tracker]) or None


def endpoints(settings: MirrorSettings) -> dict[str, str]:
    """Each tracker's server as set (switched on or not: switching on keeps it), for telling a move."""
    return {tracker: getattr(getattr(settings, tracker), URL_FIELDS[tracker]).strip() for tracker in TRACKERS}


def defaults() -> dict[str, Any]:
    return MirrorSettings().model_dump()
