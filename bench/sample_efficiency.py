"""Sample efficiency of where rollouts go: uniform prompt sampling with fixed groups against the
online-difficulty sampler with the knapsack budget (and with fixed groups, to tell the sampler's
part from the budget's), on a procedural task whose prompts differ in difficulty, at the same
rollout cost per step.

The tiny model (built locally) is first warmed up with a short supervised fine-tune on solved
problems of the task (as trainers/agent_demo.py warms its agent): a random-init 1 M-parameter
model solves nothing and RL from it learns little in minutes; warmed, it solves some problems
at each level, and the question is how fast RL improves on that. One warm model serves every
run. The training prompts mix levels (`--per-level` problems at each of `--levels`); the held-out
set is the task's held-out rows (other problems, same levels). Each run checkpoints every
`--eval-every` steps; each checkpoint is scored on the held-out set (k samples per prompt).

Prints, per method: held-out mean reward (mean over seeds) against rollouts consumed (every
rollout generated, counted from the run's reported rollouts), the rollouts each needs to first
reach the warm model's held-out reward + each `--gain` (seed mean, linear between checkpoints), and
the ratio; and the share of each method's training rollouts spent at each level.

    python bench/sample_efficiency.py
    python bench/sample_efficiency.py --task counting --levels 1 4 --seeds 0 1 2 --steps 40

Defaults (chosen by short probes, see bench/README.md): `uppercase` at levels 1-4 (2 to 5 letters),
where the warmed model passes about 0.7 / 0.3 / 0.1 / 0.01 of the held-out problems per level, and
lr 5e-4: at the demo's 2e-3 RL from the warmed model lowered held-out reward.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from trainers.data.procedural.generators import procedural_rubric  # noqa: E402
from trainers.data.procedural.rows import held_out_rows, pool_rows, write_jsonl  # noqa: E402
from trainers.demos.demo import demo_spec  # noqa: E402
from trainers.demos.tiny import build_tiny_model  # noqa: E402
from trainers.report import MemoryReporter  # noqa: E402
from trainers.run.evaluate import evaluate  # noqa: E402
from trainers.run.loop import train  # noqa: E402
from trainers.run.sft import warm_start  # noqa: E402
from trainers.spec import ProceduralSpec, RunSpec  # noqa: E402

METHODS: dict[str, dict[str, Any]] = {
    "uniform + fixed": {"sampler": "uniform", "budget": "fixed"},
    "online_difficulty + knapsack": {"sampler": "online_difficulty", "budget": "knapsack"},
    # The sampler alone: tells whether a difference comes from which prompts are drawn or from group sizes.
    "online_difficulty + fixed": {"sampler": "online_difficulty", "budget": "fixed"},
}
WARM_SEED = 10_000  # the warm-up's problems come from a seed stream no run trains or evaluates on


def warm_model(folder: Path, task: str, levels: range, steps: int) -> Path:
    base = build_tiny_model(folder / "base", seed=0)
    examples = [
        [{"role": "user", "content": row.prompt}, {"role": "assistant", "content": row.fields["answer"]}]
        for level in levels
        for row in pool_rows(task, WARM_SEED, level, 200)
    ]
    return warm_start(base, examples, folder / "warm", steps=steps, lr=3e-3, seed=0)


def run_spec(model: Path, train_path: Path, out: Path, args, seed: int, curriculum: dict[str, Any]) -> RunSpec:
    config = demo_spec(
        model, train_path, out,
        algorithm={"group_size": args.group_size},
        rollout={"max_new_tokens": args.max_new_tokens},
        optim={"lr": args.lr, "prompts_per_step": args.prompts, "micro_batch_size": 64, "total_steps": args.steps,
               "seed": seed},
        checkpoint={"every_n_steps": args.eval_every, "keep_last": args.steps, "save_final": True},
        eval={"samples_per_prompt": args.k},
    )  # fmt: skip
    config["data"] = {"path": str(train_path), "extra_fields": ["difficulty"]}
    config["rubric"] = procedural_rubric()
    config["curriculum"] = curriculum
    return RunSpec.model_validate(config)


def held_out_reward(spec: RunSpec, held_path: Path, checkpoint: str | None) -> float:
    held = spec.model_copy(deep=True)
    held.data.path = str(held_path)
    held.eval.checkpoint = checkpoint
    return evaluate(held, MemoryReporter()).metrics["eval/reward/mean"]


def one_run(
    spec: RunSpec, held_path: Path, start: float, levels_by_row: list[int]
) -> tuple[list[tuple[int, float]], Counter[int]]:
    """(rollouts consumed, held-out reward) at step 0 and at each checkpoint; rollouts per level."""
    reporter = MemoryReporter()
    train(spec, reporter)
    # A rollout's prompt_id is its data row number (with '@k' when a step draws a prompt twice).
    rows = [int(r.prompt_id.split("@")[0]) for _, batch in reporter.rollout_batches for r in batch]
    per_level = Counter(levels_by_row[row - 1] for row in rows)
    consumed = np.cumsum([len(batch) for _, batch in reporter.rollout_batches])  # after each step
    points = [(0, start)]
    for step, path in reporter.checkpoints:
        points.append((int(consumed[step - 1]), held_out_reward(spec, held_path, path)))
    return points, per_level


def rollouts_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """Rollouts where the curve first reaches `target`, linear between its points; None if never."""
    for (x0, y0), (x1, y1) in zip(curve, curve[1:], strict=False):
        if y0 >= target:
            return x0
        if y1 >= target:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="uppercase")
    parser.add_argument("--levels", type=int, nargs=2, default=[1, 4], metavar=("LOW", "HIGH"))
    parser.add_argument("--per-level", type=int, default=24, help="training problems per level")
    parser.add_argument("--held-out-per-level", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=8, help="fixed group size; knapsack spends the same")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--k", type=int, default=8, help="held-out samples per prompt")
    parser.add_argument("--warm-steps", type=int, default=600)
    parser.add_argument("--gain", type=float, nargs="+", default=[0.05, 0.08],
                        help="the rewards to reach: the warm model's + each of these")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    began = time.perf_counter()
    levels = range(args.levels[0], args.levels[1] + 1)

    with tempfile.TemporaryDirectory(prefix="sample-efficiency-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        model = warm_model(folder, args.task, levels, args.warm_steps)
        print(f"warm-up: {args.warm_steps} SFT steps in {time.perf_counter() - t0:.0f}s")
        train_rows = [row for level in levels for row in pool_rows(args.task, 0, level, args.per_level)]
        train_path = write_jsonl(train_rows, folder / "train.jsonl")
        held = ProceduralSpec(task=args.task, min_difficulty=levels[0], max_difficulty=levels[-1],
                              pool_size=args.per_level, held_out_per_level=args.held_out_per_level)  # fmt: skip
        held_rows = held_out_rows(held)
        held_path = write_jsonl(held_rows, folder / "held_out.jsonl")
        probe = run_spec(model, train_path, folder / "probe", args, 0, {})
        start = held_out_reward(probe, held_path, None)
        print(f"task {args.task}, levels {levels[0]}-{levels[-1]}: {len(train_rows)} training prompts, "
              f"{len(held_rows)} held-out; warm model's held-out reward {start:.3f}")  # fmt: skip

        curves: dict[str, list[list[tuple[int, float]]]] = {}
        spent: dict[str, Counter[int]] = {}
        levels_by_row = [row.fields["difficulty"] for row in train_rows]
        for name, curriculum in METHODS.items():
            for seed in args.seeds:
                t0 = time.perf_counter()
                spec = run_spec(model, train_path, folder / f"{name}-{seed}".replace(" ", ""), args, seed, curriculum)
                points, per_level = one_run(spec, held_path, start, levels_by_row)
                curves.setdefault(name, []).append(points)
                spent.setdefault(name, Counter()).update(per_level)
                print(f"  {name:30s} seed {seed}: " + "  ".join(f"{x}:{y:.3f}" for x, y in points)
                      + f"  ({time.perf_counter() - t0:.0f}s)")  # fmt: skip

    print("\nheld-out mean reward (mean over seeds) against rollouts consumed (mean over seeds)")
    means: dict[str, list[tuple[float, float]]] = {}
    for name, runs in curves.items():
        xs = np.mean([[x for x, _ in run] for run in runs], axis=0)
        ys = np.mean([[y for _, y in run] for run in runs], axis=0)
        sd = np.std([[y for _, y in run] for run in runs], axis=0)
        means[name] = list(zip(xs.tolist(), ys.tolist(), strict=True))
        print(f"  {name}:")
        for x, y, s in zip(xs, ys, sd, strict=True):
            print(f"    {x:8.0f} rollouts  {y:.3f} (sd {s:.3f})")
    print("\nshare of training rollouts per level (all seeds)")
    for name, counts in spent.items():
        total = sum(counts.values())
        print(f"  {name:30s} " + "  ".join(f"level {key} {counts[key] / total:.2f}" for key in sorted(counts)))
    summary = []
    for gain in args.gain:
        target = start + gain
        print(f"\nrollouts to reach held-out reward {target:.3f} (warm + {gain}):")
        reached = {name: rollouts_to_reach(curve, target) for name, curve in means.items()}
        for name, value in reached.items():
            print(f"  {name:30s} {'never' if value is None else f'{value:.0f}'}")
        uniform = reached["uniform + fixed"]
        for name, value in reached.items():
            if name != "uniform + fixed" and uniform and value:
                print(f"  ratio (uniform / {name}): {uniform / value:.2f}")
        summary.append({"target": target, "reached": reached})
    print(json.dumps({"targets": summary, "wall_s": round(time.perf_counter() - began)}))
    print(f"wall time: {time.perf_counter() - began:.0f}s")


if __name__ == "__main__":
    main()
