"""Synchronous against asynchronous against asynchronous + partial rollouts (rollout.asynchronous,
trainers.run.pipeline) on the demo task ("Repeat the letter", the tiny model built locally) or on the
real-shapes case with skewed lengths, on this machine's CPU. Generation runs in a thread of the training
process (the transformers engine on a copy of the weights), not in a process of its own.

    python bench/async_pipeline.py                              # 3 modes x seeds 0 1 2, 120 steps each
    python bench/async_pipeline.py --steps 40 --seeds 0         # a quick look
    python bench/async_pipeline.py --case real-shapes           # 3 modes, seed 0, 6 steps each

Every run is the demo's settings (8 prompts x 8 completions of up to 8 tokens, lr 2e-3), validated on
the held-out phrasings (4 letters x 3 phrasings x 4 samples) every `--val-every` steps. The asynchronous
modes use max_staleness 1 and the icepop correction (band 0.5-2); partial rollouts sample `--segment`
tokens per request with `--over-provision` x the step's groups in flight.

Prints, per mode (means over seeds): wall seconds per step (step 1 left out: the first step pays
for warm-up), sampled tokens per second of step time, the engine's and the trainer's busy fractions
(synchronous: generate_s / step_s and train_s / step_s; asynchronous: async/engine_busy and
async/trainer_busy), the step time's ratio to synchronous, final training and held-out reward, and
the step time (validation left out) each needed to first reach `--target` held-out reward.

`--case real-shapes` is bench/trainer_vs_trl.py's "real" model (hidden 512, 4 layers, the tiny
tokenizer's ids in a 151,936-token vocabulary, edited by `make_lengths_skewed`: about 3 in 4
completions open the "short" class and end at EOS, about 1/16 per token, the rest run to
max_new_tokens) with that bench's spec (lr 1e-5, micro-batch 8, float32), `--prompts` x `--group-size` completions of up to `--max-new-tokens` tokens,
partial rollouts sampling `--segment` (default 32) tokens per request. Its weights are random and
there is no held-out set, so no reward is reached or compared: it prints the time columns and the
completion lengths the steps trained on (short: ended at EOS; long: ran to max_new_tokens).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.trainer_vs_trl import Case, build_case_model, make_spec, write_dataset  # noqa: E402

MODES: dict[str, dict[str, Any]] = {
    "sync": {"rollout": {}, "algorithm": {}},
    "async": {"rollout": {"mode": "async", "max_staleness": 1}, "algorithm": {"correction": "icepop"}},
    "async+partial": {
        "rollout": {"mode": "async", "max_staleness": 1, "partial_rollouts": True},
        "algorithm": {"correction": "icepop"},
    },
}


def demo_run_spec(mode: str, seed: int, model: Path, data: Path, held_out: Path, out: Path, args) -> dict:
    from trainers.demos.demo import demo_spec

    return demo_spec(
        model, data, out,
        optim={"total_steps": args.steps, "seed": seed},
        rollout={"asynchronous": asynchronous_settings(mode, args)},
        algorithm=MODES[mode]["algorithm"],
        validation={"path": str(held_out), "every_n_steps": args.val_every, "samples_per_prompt": 4},
        checkpoint={"save_final": False},
    )  # fmt: skip


def real_case(args) -> Case:
    return Case("real", "real", args.prompts, args.group_size, args.max_new_tokens, args.micro_batch, args.steps)


def real_run_spec(mode: str, seed: int, model: Path, data: Path, out: Path, args) -> dict:
    """trainer_vs_trl's real-shapes spec with the mode's rollout.asynchronous and correction."""
    spec = make_spec(model, data, out, real_case(args), "float32", {})
    spec["optim"] |= {"total_steps": args.steps, "seed": seed}
    spec["rollout"]["asynchronous"] = asynchronous_settings(mode, args)
    spec["algorithm"] |= MODES[mode]["algorithm"]
    return spec


def asynchronous_settings(mode: str, args) -> dict[str, Any]:
    asynchronous = dict(MODES[mode]["rollout"])
    if asynchronous.get("partial_rollouts"):
        asynchronous |= {"segment_tokens": args.segment, "over_provision": args.over_provision}
    return asynchronous


def run(mode: str, spec_json: dict, args) -> dict[str, Any]:
    from trainers.report import MemoryReporter
    from trainers.run.loop import train
    from trainers.spec import RunSpec

    spec = RunSpec.model_validate(spec_json)
    reporter = MemoryReporter()
    started = time.perf_counter()
    result = train(spec, reporter)
    wall = time.perf_counter() - started
    assert result.status == "succeeded", result.detail
    steps = {step: m for step, m in reporter.metric_points if "timing/step_s" in m}
    val = {step: m["val/reward/mean"] for step, m in reporter.metric_points if "val/reward/mean" in m}
    batches = dict(reporter.rollout_batches)
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
    counted = [r for s in later for r in batches[s]]
    return {
        "step_s": statistics.mean(step_s),
        "step_s_each": step_s,
        "tokens_per_s": sum(r.num_tokens for r in counted) / sum(step_s),
        "engine_busy": statistics.mean(engine),
        "trainer_busy": statistics.mean(trainer),
        "reward_last10": statistics.mean(steps[s]["reward/mean"] for s in sorted(steps)[-10:]),
        "val_final": val[max(val)] if val else None,
        "reached_s": reached,
        "dropped": sum(steps[s].get("async/dropped_stale", 0.0) for s in steps),
        "short": sum(r.finish_reason != "length" for r in counted),
        "long": sum(r.finish_reason == "length" for r in counted),
        "long_each": [sum(r.finish_reason == "length" for r in batches[s]) for s in later],
        "mean_tokens": statistics.mean(r.num_tokens for r in counted),
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=["demo", "real-shapes"], default="demo")
    parser.add_argument("--steps", type=int, help="steps per run (demo 120, real-shapes 6)")
    parser.add_argument("--seeds", type=int, nargs="+", help="(demo 0 1 2, real-shapes 0)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--val-every", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.5, help="held-out reward to reach")
    parser.add_argument("--segment", type=int, help="partial rollouts: tokens per request (demo 4, real-shapes 32)")
    parser.add_argument("--over-provision", type=float, default=1.5)
    parser.add_argument("--prompts", type=int, default=4, help="real-shapes: prompts per step")
    parser.add_argument("--group-size", type=int, default=4, help="real-shapes: completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="real-shapes: the long completions' length")
    parser.add_argument("--micro-batch", type=int, default=8, help="real-shapes: sequences per forward/backward")
    args = parser.parse_args()
    real = args.case == "real-shapes"
    args.steps = args.steps or (6 if real else 120)
    args.seeds = args.seeds or ([0] if real else [0, 1, 2])
    args.segment = args.segment or (32 if real else 4)

    import torch

    tmp = Path(tempfile.mkdtemp(prefix="async-bench-"))
    if real:
        case = real_case(args)
        model = build_case_model(case, tmp, eos_prob=0.0)
        data = write_dataset(tmp / "data.jsonl", args.prompts)
        spec_for = lambda mode, seed: real_run_spec(mode, seed, model, data, tmp / f"{mode}-{seed}", args)  # noqa: E731
        shape = (f"real shapes: {args.prompts} prompts x {args.group_size} completions of up to "
                 f"{args.max_new_tokens} tokens, micro-batch {args.micro_batch}, segment {args.segment}")  # fmt: skip
    else:
        from trainers.demos.demo import HELD_OUT_PROMPTS, make_demo_dataset
        from trainers.demos.tiny import build_tiny_model

        model = build_tiny_model(tmp / "model", seed=0)
        data = make_demo_dataset(tmp / "letters.jsonl")
        held_out = make_demo_dataset(tmp / "held_out.jsonl", prompts=HELD_OUT_PROMPTS)
        spec_for = lambda mode, seed: demo_run_spec(mode, seed, model, data, held_out, tmp / f"{mode}-{seed}", args)  # noqa: E731
        shape = f"demo, segment {args.segment}"
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} intra-op threads; {shape}; {args.steps} steps, seeds {args.seeds}; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in args.modes}
    for seed in args.seeds:  # modes interleaved, so a change in the machine's load touches each alike
        for mode in args.modes:
            r = run(mode, spec_for(mode, seed), args)
            results[mode].append(r)
            if real:
                each = " ".join(f"{t:.1f}" for t in r["step_s_each"])
                long_each = " ".join(str(n) for n in r["long_each"])
                print(f"  seed {seed} {mode:14s} {r['step_s'] * 1000:8.0f} ms/step ({each} s); completions "
                      f"{r['short']} short / {r['long']} long ({long_each} long per step)  (wall {r['wall']:.1f}s, "
                      f"load average {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
                continue
            reached = f"{r['reached_s']:.1f}s" if r["reached_s"] is not None else "never"
            print(f"  seed {seed} {mode:14s} {r['step_s'] * 1000:6.1f} ms/step  val {r['val_final']:.3f}  "
                  f"reached {args.target} after {reached}  (wall {r['wall']:.1f}s)", flush=True)  # fmt: skip

    sync = statistics.mean(r["step_s"] for r in results["sync"]) if "sync" in results else None
    if real:
        print_real_table(results, sync)
        return
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


def print_real_table(results: dict[str, list[dict[str, Any]]], sync: float | None) -> None:
    """The real-shapes table: no reward columns (random weights, no held-out set)."""
    print(f"\n{'mode':14s} {'ms/step':>8s} {'x sync':>7s} {'tok/s':>7s} {'engine':>7s} {'trainer':>8s} "
          f"{'short':>6s} {'long':>5s} {'tok/compl':>10s} {'dropped':>8s}")  # fmt: skip
    for mode, runs in results.items():
        step_s = statistics.mean(r["step_s"] for r in runs)
        print(
            f"{mode:14s} {step_s * 1000:8.0f} {step_s / sync if sync else float('nan'):7.2f} "
            f"{statistics.mean(r['tokens_per_s'] for r in runs):7.1f} "
            f"{statistics.mean(r['engine_busy'] for r in runs):7.2f} {statistics.mean(r['trainer_busy'] for r in runs):8.2f} "
            f"{sum(r['short'] for r in runs):6d} {sum(r['long'] for r in runs):5d} "
            f"{statistics.mean(r['mean_tokens'] for r in runs):10.1f} {statistics.mean(r['dropped'] for r in runs):8.1f}"
        )  # fmt: skip
    print("(short: ended at EOS; long: ran to max_new_tokens; over the counted steps, step 1 left out. "
          "Random weights: no reward to reach.)")  # fmt: skip


if __name__ == "__main__":
    main()
