"""MLflow: metrics as the run's metrics (by step), the settings as params (dotted keys) and as a
`settings/run_spec.json` artifact, rollouts as a table artifact per step (`rollouts/step_000012.json`,
MLflow's `log_table`: the run's artifacts and the UI's table view): step, prompt, completion, reward,
advantage, score/<criterion>, tokens, finish reason. The tracker's run is tagged `studio.run_id`, so a
restarted studio run goes on in the same MLflow run.

Credentials: MLflow reads them from the environment (MLFLOW_TRACKING_TOKEN/USERNAME/PASSWORD), which
every process the worker starts would inherit. Instead the mirror thread sets its team's credential in
a context variable while it calls the client, and a request-header provider registered with MLflow adds
the Authorization header from it: only that thread's requests carry it. The header goes with the
tracking API's calls, and with artifact uploads only where the run's artifact store is the tracking server
itself (mlflow-artifacts, proxied): an experiment's artifact location may name any server, and the
credential is bound to the tracking server (studio.tracking).
"""

from __future__ import annotations

import base64
import contextvars
import json
import os
import time
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import workers.mirroring.rows as rows
from trainers.access import bound_to
from workers.mirroring.registry import TRACKERS, RunInfo

_AUTHORIZATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("studio_mlflow_auth", default=None)
# MLflow's client retries a refused request 7 times with doubling backoff (minutes); a mirror thread should
# fail fast and try again with the next step. Only defaults: an operator's own values are kept.
CLIENT_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
                   "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}  # fmt: skip
PARAMS_PER_CALL = 100  # log_batch's limit
PARAM_VALUE_CHARS = 6000
_registered = False


def _register_header_provider() -> None:
    global _registered
    if _registered:
        return
    from mlflow.tracking.request_header.abstract_request_header_provider import RequestHeaderProvider
    from mlflow.tracking.request_header.registry import _request_header_provider_registry

    class StudioAuthorization(RequestHeaderProvider):
        """The Authorization header of the mirror thread that is calling MLflow, if it set one."""

        def in_context(self) -> bool:
            return _AUTHORIZATION.get() is not None

        def request_headers(self) -> dict[str, str]:
            return {"Authorization": _AUTHORIZATION.get() or ""}

    _request_header_provider_registry.register(StudioAuthorization)
    _registered = True


@TRACKERS.register("mlflow")
class MlflowTracker:
    def __init__(self, section: Any, secret: str | None, limits: Any) -> None:
        self.section, self.limits = section, limits
        self.authorization = _authorization(section.auth, secret)
        self.artifact_authorization: str | None = None  # set once the run's artifact store is known
        self.client = None
        self.run_id = ""
        self.location = ""

    @contextmanager
    def _auth(self, artifacts: bool = False):
        token = _AUTHORIZATION.set(self.artifact_authorization if artifacts else self.authorization)
        try:
            yield
        finally:
            _AUTHORIZATION.reset(token)

    def start(self, run: RunInfo) -> None:
        for key, value in CLIENT_DEFAULTS.items():
            os.environ.setdefault(key, value)
        from mlflow import MlflowClient

        _register_header_provider()
        self.client = MlflowClient(tracking_uri=self.section.tracking_uri)
        with self._auth():
            experiment_id = self._experiment_id()
            found = self.client.search_runs([experiment_id], f"tags.`studio.run_id` = '{run.run_id}'", max_results=1)
            if found:
                self.run_id, artifact_uri = found[0].info.run_id, found[0].info.artifact_uri
            else:
                tags = {"studio.run_id": str(run.run_id), "studio.team": run.team, "studio.kind": run.kind, **run.tags}
                info = self.client.create_run(experiment_id, run_name=run.tracker_name, tags=tags).info
                self.run_id, artifact_uri = info.run_id, info.artifact_uri
            if artifact_store_is(artifact_uri, self.section.tracking_uri):
                self.artifact_authorization = self.authorization
            if not found:
                self._log_settings(run.config)
        base = self.section.tracking_uri.rstrip("/")
        self.location = f"{base}/#/experiments/{experiment_id}/runs/{self.run_id}"

    def _experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(self.section.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(self.section.experiment)
        except MlflowException:  # another run's mirror created it meanwhile
            return self.client.get_experiment_by_name(self.section.experiment).experiment_id

    def _log_settings(self, config: dict[str, Any]) -> None:
        from mlflow.entities import Param

        flat = rows.flat_settings(config)
        params = [Param(k[:250], v[:PARAM_VALUE_CHARS]) for k, v in sorted(flat.items())]
        for i in range(0, len(params), PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, params=params[i : i + PARAMS_PER_CALL])
        with self._auth(artifacts=True):
            self.client.log_text(self.run_id, json.dumps(config, indent=1, sort_keys=True, default=str),
                                 "settings/run_spec.json")  # fmt: skip

    def metrics(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, int(step)) for key, value in values.items()]
        with self._auth():
            for i in range(0, len(metrics), 1000):
                self.client.log_batch(self.run_id, metrics=metrics[i : i + 1000])

    def rollouts(self, step: int, rollouts: list) -> int:
        chosen = rows.sample(rollouts, self.limits.rollouts_per_step)
        if not chosen:
            return 0
        table_rows = [rows.row(r, self.limits.max_text_chars) for r in chosen]
        names = rows.columns(table_rows)
        folder = rows.log_name(chosen)
        with self._auth(artifacts=True):
            self.client.log_table(self.run_id, {c: [r.get(c) for r in table_rows] for c in names},
                                  f"{folder}/step_{int(step):06d}.json")  # fmt: skip
        return len(chosen)

    def finish(self, state: str) -> None:
        if self.client is None or not self.run_id:
            return
        status = {"succeeded": "FINISHED", "cancelled": "KILLED", "interrupted": "KILLED"}.get(state, "FAILED")
        with self._auth():
            self.client.set_terminated(self.run_id, status=status)


def artifact_store_is(artifact_uri: str, tracking_uri: str) -> bool:
    """Whether artifact uploads to `artifact_uri` go to the tracking server: mlflow-artifacts URIs without a
    host (the server proxies them), or with the tracking server's host, or http(s) URLs under it."""
    try:
        parts = urlsplit(artifact_uri or "")
    except ValueError:
        return False
    if parts.scheme == "mlflow-artifacts":
        if not parts.netloc:
            return True
        return bound_to(f"{urlsplit(tracking_uri).scheme}://{parts.netloc}/", tracking_uri.split("?")[0])
    return parts.scheme in ("http", "https") and bound_to(artifact_uri, tracking_uri)


def _authorization(auth: str, secret: str | None) -> str | None:
    if auth == "token" and secret:
        return f"Bearer {secret}"
    if auth == "basic" and secret:
        return "Basic " + base64.standard_b64encode(secret.encode()).decode()
    return None
