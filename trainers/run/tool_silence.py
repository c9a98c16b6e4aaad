"""A warning for a run whose environment offers tools and whose model calls none.

A model that has never seen the environment's tool-call format answers every prompt in one turn:
the run trains, its reward may even rise, and nothing says that the agent part never happened.
After SILENT_STEPS steps in which no episode called a tool, the run's page gets one warning
saying so and what usually helps (a cold start on transcripts that call the tools)."""

from __future__ import annotations

from trainers.report import Reporter
from trainers.spec.run import RunSpec

SILENT_STEPS = 3
TOOL_CALLS = "episode/tool_calls_mean"  # trainers.run.step_metrics.episode_metrics


class ToolSilence:
    """Counts the steps of a tools environment in which no episode called a tool; warns once."""

    def __init__(self, spec: RunSpec) -> None:
        environment = spec.environment
        self.watching = environment is not None and environment.kind == "tools"
        self.formats = ", ".join((environment.params.get("formats") or []) if environment else [])
        self.cold_start = spec.warm_up is not None
        self.silent = 0

    def observe(self, step: int, metrics: dict[str, float], reporter: Reporter) -> None:
        """One step's metrics (averaged over processes): a tool call ends the watch; SILENT_STEPS without warn."""
        if not self.watching:
            return
        if metrics.get(TOOL_CALLS, 0.0) > 0:
            self.watching = False
            return
        self.silent += 1
        if self.silent < SILENT_STEPS:
            return
        self.watching = False
        how = f" ({self.formats})" if self.formats else ""
        advice = ("a longer warm_up, or a system prompt with an example call, may help" if self.cold_start else
                  "a short supervised cold start on transcripts that call the tools (warm_up, as the calculator "
                  "demo has) usually teaches it")  # fmt: skip
        reporter.warning(step, f"no episode called a tool in {SILENT_STEPS} steps: the model may not know the "
                               f"environment's tool-call format{how}; {advice}")  # fmt: skip
