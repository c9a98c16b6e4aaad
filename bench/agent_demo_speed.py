"""How soon does the studio's agent demo show tool calls, and how long is a step, by how it samples?

The demo (`trainers.demos.real_agent.real_agent_demo_spec`: SmolLM2-135M-Instruct with the calculator,
its cold start as the run's first part) run for a few GRPO steps under each sampling set-up:

- `transformers`: the trained model samples itself, in float32 (the default engine);
- `vllm-float32`: colocated vLLM, float32 like the trainer;
- `vllm-bfloat16`: colocated vLLM sampling in bfloat16 (`rollout.dtype`) while training stays float32, with
  the truncated importance-sampling correction for the difference;
- `vllm-float32-eager`: colocated vLLM in float32 without graph compilation (`rollout.vllm_enforce_eager`);
- `demo`: what the studio's agent demo runs with where vLLM is installed (`real_agent.FAST_SAMPLING`: vLLM
  without compilation, bfloat16 where the device computes it natively, else float32).

    python bench/agent_demo_speed.py                         # every set-up, 2 steps each
    python bench/agent_demo_speed.py --setups vllm-bfloat16 --steps 5

For each it prints seconds from the start to: the cold start's end, the step-0 validation's rollouts
(the first tool calls the inspector shows) and each step's end; the mean generation and training time of
a step; the share of the step-0 validation's episodes that called the calculator and got it right; and
the logprob gap between sampler and trainer. Runs on the GPU when there is one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainers.demos.real_agent import (  # noqa: E402
    FAST_SAMPLING,
    make_real_agent_dataset,
    make_warm_up_file,
    real_agent_demo_spec,
)
from trainers.models.pretrained import SMOLLM2, install  # noqa: E402
from trainers.report import MemoryReporter  # noqa: E402

SETUPS: dict[str, dict[str, Any]] = {
    "transformers": {"rollout": {"engine": "transformers"}},
    "vllm-float32": {"rollout": {"engine": "vllm"}},
    "vllm-bfloat16": {"rollout": {"engine": "vllm", "dtype": "bfloat16"}, "algorithm": {"correction": "tis"}},
    "vllm-float32-eager": {"rollout": {"engine": "vllm", "vllm_enforce_eager": True}},
    "demo": FAST_SAMPLING,  # what the studio's demo runs with where vLLM is installed
}


class TimedReporter(MemoryReporter):
    """A MemoryReporter that notes when each batch of rollouts and each step's metrics arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.monotonic()
        self.rollout_times: list[tuple[int, float]] = []
        self.metric_times: list[tuple[int, float]] = []

    def rollouts(self, step: int, rollouts) -> None:
        super().rollouts(step, rollouts)
        self.rollout_times.append((step, time.monotonic() - self.started))

    def metrics(self, step: int, values: dict[str, float]) -> None:
        super().metrics(step, values)
        self.metric_times.append((step, time.monotonic() - self.started))


def called_and_right(rollouts) -> tuple[float, float]:
    """Shares of `rollouts` with a turn that called a tool, and whose reward passed 0.8."""
    called = [any(turn["tool_calls"] for turn in r.turns or []) for r in rollouts]
    right = [r.reward >= 0.8 for r in rollouts]
    return sum(called) / max(1, len(called)), sum(right) / max(1, len(right))


def one_run(name: str, model: str, data: Path, warm: Path, out: Path, steps: int) -> dict[str, Any]:
    from trainers.run.loop import train
    from trainers.spec import RunSpec

    overrides = {**SETUPS[name], "optim": {"total_steps": steps}, "validation": {"every_n_steps": steps}}
    rollout = {**SETUPS[name].get("rollout", {}), "vllm_gpu_memory_utilization": 0.1}
    spec = RunSpec.model_validate(real_agent_demo_spec(model, data, warm, out, **{**overrides, "rollout": rollout}))
    reporter = TimedReporter()
    train(spec, reporter)
    total = time.monotonic() - reporter.started
    steps_done = [(s, v) for s, v in reporter.metric_points if "timing/step_s" in v]
    first_val = next((t for s, t in reporter.rollout_times if s == 0), float("nan"))
    val0 = [r for s, batch in reporter.rollout_batches if s == 0 for r in batch if r.split == "validation"]
    gaps = [v["rollout/logprob_gap_mean"] for _, v in steps_done if "rollout/logprob_gap_mean" in v]
    return {
        "setup": name,
        "total_s": total,
        "first_rollouts_s": first_val,
        "step_end_s": [t for s, t in reporter.metric_times if any(s == d for d, _ in steps_done)],
        "generate_s": statistics.mean(v["timing/generate_s"] for _, v in steps_done),
        "train_s": statistics.mean(v["timing/train_s"] for _, v in steps_done),
        "val0_called_right": called_and_right(val0),
        "gap": statistics.mean(gaps) if gaps else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--model", help="a model folder (default: the packaged SmolLM2, converted once)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model = args.model or str(install(SMOLLM2, ROOT / "var" / "demo"))
        data = make_real_agent_dataset(tmp_path / "data.jsonl")
        warm = make_warm_up_file(tmp_path / "warm.jsonl")
        results = [one_run(name, model, data, warm, tmp_path / name, args.steps) for name in args.setups]
    print(f"\n{'setup':<15} {'first tool calls':>16} {'steps end (s)':>22} {'generate':>9} {'train':>7} "
          f"{'val0 called/right':>18} {'gap':>7} {'total':>7}")  # fmt: skip
    for r in results:
        called, right = r["val0_called_right"]
        ends = ", ".join(f"{t:.0f}" for t in r["step_end_s"])
        print(f"{r['setup']:<15} {r['first_rollouts_s']:>15.0f}s {ends:>22} {r['generate_s']:>8.1f}s "
              f"{r['train_s']:>6.1f}s {called:>8.2f} / {right:.2f} {r['gap']:>7.3f} {r['total_s']:>6.0f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
