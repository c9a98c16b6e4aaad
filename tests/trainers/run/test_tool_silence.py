"""The warning for a tools environment whose model calls no tool (trainers/run/tool_silence.py)."""

from __future__ import annotations

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.tool_silence import SILENT_STEPS, TOOL_CALLS, ToolSilence
from trainers.spec.run import RunSpec

TOOLS = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}], "formats": ["hermes"]}}


def watch(spec: RunSpec, calls_per_step: list[float]) -> list[tuple[int | None, str]]:
    reporter, silence = MemoryReporter(), ToolSilence(spec)
    for step, calls in enumerate(calls_per_step, start=1):
        silence.observe(step, {TOOL_CALLS: calls, "reward/mean": 0.5}, reporter)
    return reporter.warnings


def test_steps_without_a_tool_call_warn_once_with_the_format_and_a_cold_start(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, environment=TOOLS)
    [(step, message)] = watch(spec, [0.0] * (SILENT_STEPS + 4))
    assert step == SILENT_STEPS
    assert message.startswith(f"no episode called a tool in {SILENT_STEPS} steps: the model may not know the "
                              "environment's tool-call format (hermes); a short supervised cold start")  # fmt: skip
    assert "warm_up" in message


def test_a_tool_call_before_then_ends_the_watch(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, environment=TOOLS)
    assert watch(spec, [0.0] * (SILENT_STEPS - 1) + [0.25] + [0.0] * SILENT_STEPS) == []
    assert len(watch(spec, [0.0] * SILENT_STEPS)) == 1  # one step fewer than that and it would have warned


def test_runs_without_a_tools_environment_are_not_watched(tiny_model_path, tmp_path):
    assert watch(tiny_spec(tiny_model_path, tmp_path), [0.0] * (SILENT_STEPS + 1)) == []
