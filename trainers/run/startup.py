"""What a run does before its first step, said in the log as it goes: loading the model, starting the
engine, the step-0 validation, the first step's sampling, each numbered ("starting (2/4): ...") and
with how long the one before took. On a CPU these take minutes, and the run page showed only
"step 0/20, ETA –" with nothing in the log (issue 39); it shows a run's latest log line in its header
until the first step (frontend/static/js/run_page.js), so these lines say where the run is."""

from __future__ import annotations

import time

from trainers.report import Reporter
from trainers.spec import RunSpec


class Startup:
    """The start's phases; `begin` logs the next one (the first step's, once, ends the start)."""

    def __init__(self, spec: RunSpec, reporter: Reporter, resumed: bool) -> None:
        self.spec = spec
        self.reporter = reporter
        validates = spec.validation is not None and spec.validation.at_start and not resumed
        self.total = 4 if validates else 3  # the model, the engine, [the step-0 validation], the first step
        self.done = 0
        self.since: float | None = None

    def begin(self, what: str) -> None:
        if self.done >= self.total:
            return
        now = time.perf_counter()
        took = f" (the last part took {now - self.since:.1f} s)" if self.since is not None else ""
        self.done += 1
        self.since = now
        self.reporter.log(f"starting ({self.done}/{self.total}): {what}{took}")

    def model(self) -> None:
        model = self.spec.model
        reference = " and its frozen reference (kl_beta > 0)" if self.spec.algorithm.kl_beta > 0 else ""
        teachers = self.spec.teacher.teachers if self.spec.teacher is not None else []
        taught = f", its teachers ({', '.join(t.name for t in teachers)})" if teachers else ""
        self.begin(f"loading the model {model.path}{reference}{taught}")

    def engine(self) -> None:
        self.begin(f"starting the {self.spec.rollout.engine} engine, reading the prompts")

    def validation(self, prompts: int) -> None:
        k = self.spec.validation.samples_per_prompt if self.spec.validation is not None else 0
        self.begin(f"the step-0 validation: {prompts} held-out prompts x {k} samples")

    def first_step(self, step: int) -> None:
        if self.total - self.done != 1:  # a part was skipped (a resumed run's validation): say the step anyway
            self.done = self.total - 1
        optim, group = self.spec.optim, self.spec.algorithm.group_size
        self.begin(f"step {step}: sampling {optim.prompts_per_step} prompts x {group} completions, then the update")
