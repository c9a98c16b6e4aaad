"""W&B: metrics as the run's history, the settings as its config, rollouts as a W&B Table per step
(`rollouts` for training samples, `validation_rollouts` for held-out ones): step, prompt, completion,
reward, advantage, score/<criterion>, tokens, finish reason.

The API key goes to the client in `wandb.Settings(api_key=...)`: never `wandb.login` (which writes
~/.netrc) and never the environment. Online mode sends to `base_url`; offline mode writes the run's
files under the run's folder on the worker (`wandb sync` uploads them later).
"""

from __future__ import annotations

from typing import Any

import workers.mirroring.rows as rows
from workers.mirroring.registry import TRACKERS, RunInfo

INIT_TIMEOUT_S = 60.0


@TRACKERS.register("wandb")
class WandbTracker:
    def __init__(self, section: Any, secret: str | None, limits: Any) -> None:
        self.section, self.secret, self.limits = section, secret, limits
        self.run = None
        self.location = ""

    def start(self, run: RunInfo) -> None:
        import wandb

        folder = run.folder / "wandb"
        folder.mkdir(parents=True, exist_ok=True)
        settings = wandb.Settings(
            mode=self.section.mode, api_key=self.secret or None, base_url=self.section.base_url, console="off",
            silent=True, x_disable_stats=True, disable_git=True, save_code=False, init_timeout=INIT_TIMEOUT_S,
        )  # fmt: skip
        self.run = wandb.init(
            project=self.section.project, entity=self.section.entity or None, name=run.tracker_name,
            id=f"studio-run-{run.run_id}", resume="allow", group=run.experiment or None, job_type=run.kind,
            config=run.config, dir=str(folder), settings=settings, reinit="create_new", tags=["rollout-studio"],
        )  # fmt: skip
        self.location = self.run.url or self.run.dir

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(dict(values), step=step)

    def rollouts(self, step: int, rollouts: list) -> int:
        import wandb

        chosen = rows.sample(rollouts, self.limits.rollouts_per_step)
        if not chosen:
            return 0
        table_rows = [rows.row(r, self.limits.max_text_chars) for r in chosen]
        names = rows.columns(table_rows)
        table = wandb.Table(columns=names, data=[[r.get(c) for c in names] for r in table_rows])
        key = rows.log_name(chosen)
        self.run.log({key: table}, step=step)
        return len(chosen)

    def finish(self, state: str) -> None:
        if self.run is not None:
            self.run.finish(exit_code=0 if state in ("succeeded", "cancelled") else 1)
