"""Synchronous against asynchronous against asynchronous + partial rollouts (rollout.asynchronous,
trainers.run.pipeline) on the demo task ("Repeat the letter", the tiny model built locally), on this
machine's CPU. Generation runs in a thread of the training process (the transformers engine on a copy
of the weights), not in a process of its own.

    python bench/async_pipeline.py                              # 3 modes x seeds 0 1 2, 120 steps each
    python bench/async_pipeline.py --steps 40 --seeds 0         # a quick look

Every run is the demo's settings (8 prompts x 8 completions of up to 8 tokens, lr 2e-3), validated on
the held-out phrasings (4 letters x 3 phrasings x 4 samples) every `--val-every` steps. The asynchronous
modes use max_staleness 1 and the icepop correction (band 0.5-2); partial rollouts sample `--segment`
tokens per request with `--over-provision` x the step's groups in flight.

Prints, per mode (means over seeds): wall seconds per step (step 1 left out: the first step pays
for warm-up), sampled tokens per second of step time, the engine's and the trainer's busy fractions
(synchronous: generate_s / step_s and train_s / step_s; asynchronous: async/engine_busy and
async/trainer_busy), the step time's ratio to synchronous, final training and held-out reward, and
the step time (validation left out) each needed to first reach `--target` held-out reward.
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

MODES: dict[str, dict[str, Any]] = {
    "sync": {"rollout": {}, "algorithm": {}},
    "async": {"rollout": {"mode": "async", "max_staleness": 1}, "algorithm": {"correction": "icepop"}},
    "async+partial": {
        "rollout": {"mode": "async", "max_staleness": 1, "partial_rollouts": True},
        "algorithm": {"correction": "icepop"},
    },
}


def run(mode: str, seed: int, model: Path, data: Path, held_out: Path, out: Path, args) -> dict[str, Any]:
    from trainers.demos.demo import demo_spec
    from trainers.report import MemoryReporter
    from trainers.run.loop import train
    from trainers.spec import RunSpec

    asynchronous = dict(MODES[mode]["rollout"])
    if asynchronous.get("partial_rollouts"):
        asynchronous |= {"segment_tokens": args.segment, "over_provision": args.over_provision}
    spec = RunSpec.model_validate(demo_spec(
        model, data, out,
        optim={"total_steps": args.steps, "seed": seed},
        rollout={"asynchronous": asynchronous},
        algorithm=MODES[mode]["algorithm"],
        validation={"path": str(held_out), "every_n_steps": args.val_every, "samples_per_prompt": 4},
        checkpoint={"save_final": False},
    ))  # fmt: skip
    reporter = MemoryReporter()
    started = time.perf_counter()
    result = train(spec, reporter)
    wall = time.perf_counter() - started
    assert result.status == "succeeded", result.detail
    steps = {step: m for step, m in reporter.metric_points if "timing/step_s" in m}
    val = {step: m["val/reward/mean"] for step, m in reporter.metric_points if "val/reward/mean" in m}
    tokens = {step: sum(r.num_tokens for r in batch) for step, batch in reporter.rollout_batches}
    later = [s for s in steps if s > 1]
    step_s = [steps[s]["timing/step_s"] for s in later]
    if mode == "sync":
        engine = [steps[s]["timing/generate_s"] / steps[s]["timing/step_s"] for s in later]
        trainer = [steps[s]["timing/train_s"] / steps[s]["timing/step_s"] for s in later]
    else:
        engine = [steps[s]["async/engine_busy"] for s in later]
        trainer = [steps[s]["async/trainer_busy"] for s in later]
    elapsed, clock = {0: 0.0}, 0.0
    for s in sorted(steps):
        clock += steps[s]["timing/step_s"]
        elapsed[s] = clock
    reached = next((elapsed[s] for s in sorted(val) if val[s] >= args.target), None)
    return {
        "step_s": statistics.mean(step_s),
        "tokens_per_s": sum(tokens[s] for s in later) / sum(step_s),
        "engine_busy": statistics.mean(engine),
        "trainer_busy": statistics.mean(trainer),
        "reward_last10": statistics.mean(steps[s]["reward/mean"] for s in sorted(steps)[-10:]),
        "val_final": val[max(val)],
        "reached_s": reached,
        "dropped": sum(steps[s].get("async/dropped_stale", 0.0) for s in steps),
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--val-every", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.5, help="held-out reward to reach")
    parser.add_argument("--segment", type=int, default=4, help="partial rollouts: tokens per request")
    parser.add_argument("--over-provision", type=float, default=1.5)
    args = parser.parse_args()

    import torch

    from trainers.demos.demo import HELD_OUT_PROMPTS, make_demo_dataset
    from trainers.demos.tiny import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="async-bench-"))
    model = build_tiny_model(tmp / "model", seed=0)
    data = make_demo_dataset(tmp / "letters.jsonl")
    held_out = make_demo_dataset(tmp / "held_out.jsonl", prompts=HELD_OUT_PROMPTS)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} intra-op threads; {args.steps} steps, seeds {args.seeds}")
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in args.modes}
    for seed in args.seeds:  # modes interleaved, so a change in the machine's load touches each alike
        for mode in args.modes:
            r = run(mode, seed, model, data, held_out, tmp / f"{mode}-{seed}", args)
            results[mode].append(r)
            reached = f"{r['reached_s']:.1f}s" if r["reached_s"] is not None else "never"
            print(f"  seed {seed} {mode:14s} {r['step_s'] * 1000:6.1f} ms/step  val {r['val_final']:.3f}  "
                  f"reached {args.target} after {reached}  (wall {r['wall']:.1f}s)", flush=True)  # fmt: skip

    sync = statistics.mean(r["step_s"] for r in results["sync"]) if "sync" in results else None
    print(f"\n{'mode':14s} {'ms/step':>8s} {'x sync':>7s} {'tok/s':>7s} {'engine':>7s} {'trainer':>8s} "
          f"{'reward':>7s} {'val':>6s} {'to ' + str(args.target):>9s} {'dropped':>8s}")  # fmt: skip
    for mode, runs in results.items():
        step_s = statistics.mean(r["step_s"] for r in runs)
        reached = [r["reached_s"] for r in runs if r["reached_s"] is not None]
        to_target = f"{statistics.mean(reached):.1f}s" if reached else "never"
        if reached and len(reached) < len(runs):
            to_target += f" ({len(reached)}/{len(runs)})"  # the mean is over the seeds that got there
        print(
            f"{mode:14s} {step_s * 1000:8.1f} {step_s / sync if sync else float('nan'):7.2f} "
            f"{statistics.mean(r['tokens_per_s'] for r in runs):7.0f} "
            f"{statistics.mean(r['engine_busy'] for r in runs):7.2f} {statistics.mean(r['trainer_busy'] for r in runs):8.2f} "
            f"{statistics.mean(r['reward_last10'] for r in runs):7.3f} {statistics.mean(r['val_final'] for r in runs):6.3f} "
            f"{to_target:>9s} {statistics.mean(r['dropped'] for r in runs):8.1f}"
        )  # fmt: skip


if __name__ == "__main__":
    main()
