"""Trackio: metrics as a run's curves, the settings as its config, rollouts as Trackio traces
(prompt and completion as messages; reward, advantage and per-criterion scores in each trace's metadata).

Without a server_url the worker's local Trackio store is used (a SQLite file per project in Trackio's
folder: TRACKIO_DIR, else ~/.cache/huggingface/trackio; `trackio show` opens it). With one, the team's
self-hosted Trackio server, its write token given to the client in the URL (never through the
environment). Logging to a Hugging Face Space is not offered: Trackio reads the Hub token from the
process's environment or login file, which the worker would have to share with everything it starts.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import workers.mirroring.rows as rows
from workers.mirroring.registry import TRACKERS, RunInfo


@TRACKERS.register("trackio")
class TrackioTracker:
    def __init__(self, section: Any, secret: str | None, limits: Any) -> None:
        self.section, self.secret, self.limits = section, secret, limits
        self.run = None
        self.location = ""

    def start(self, run: RunInfo) -> None:
        import trackio
        from trackio import utils

        server_url = None
        if self.section.server_url:
            self._check_reachable(self.section.server_url)
            server_url = _with_token(self.section.server_url, self.secret or "")
            self.location = (
                f"{self.section.server_url.rstrip('/')} project {self.section.project}, run {run.tracker_name}"
            )
        else:
            self.location = str(utils.TRACKIO_DIR / f"{self.section.project}.db")
        self.run = trackio.init(
            project=self.section.project, name=run.tracker_name, group=run.experiment or None, config=run.config,
            resume="allow", server_url=server_url, embed=False, auto_log_cpu=False, auto_log_gpu=False,
        )  # fmt: skip

    @staticmethod
    def _check_reachable(url: str) -> None:
        """Trackio keeps what it cannot send in a local buffer and says so only in a warning: ask the
        server first, so a server that is down shows on the run page."""
        import httpx

        httpx.get(url, timeout=5.0).raise_for_status()

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(dict(values), step=step)

    def rollouts(self, step: int, rollouts: list) -> int:
        import trackio

        chosen = rows.sample(rollouts, self.limits.rollouts_per_step)
        if not chosen:
            return 0
        traces = [trackio.Trace(messages=rows.messages(r, self.limits.max_text_chars), metadata=_metadata(r))
                  for r in chosen]  # fmt: skip
        key = rows.log_name(chosen)
        self.run.log({key: traces}, step=step)
        return len(chosen)

    def finish(self, state: str) -> None:
        if self.run is not None:
            self.run.finish()


def _metadata(rollout) -> dict[str, Any]:
    return {
        "prompt_id": str(rollout.prompt_id), "sample_index": int(rollout.sample_index), "split": rollout.split,
        "reward": float(rollout.reward), "advantage": float(rollout.advantage),
        "scores": {name: float(s.score) for name, s in sorted(rollout.scores.items())},
        "num_tokens": int(rollout.num_tokens), "finish_reason": rollout.finish_reason, "trained": bool(rollout.trained),
    }  # fmt: skip


def _with_token(url: str, token: str) -> str:
    parts = urlsplit(url)
    query = "&".join(p for p in (parts.query, urlencode({"write_token": token})) if p)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
