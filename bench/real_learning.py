"""Does the real model learn the real demo? Held-out validation before and after N GRPO steps of
the studio's real demo (`trainers.demos.real`: SmolLM2-135M-Instruct, generated sums answered with
the number alone), for several seeds and each rollout engine, with wall time.

    python bench/real_learning.py                                   # 3 seeds, transformers and vllm, the demo's steps
    python bench/real_learning.py --engines transformers --seeds 0 --steps 10 # one short run
    python bench/real_learning.py --model /path/to/folder --lr 3e-5

For each (engine, seed) it prints the held-out reward, pass rate (both criteria right) and each
criterion's mean at step 0 and at the last validation, the best validation along the way, and
seconds for the whole run; then per engine the mean over seeds. The held-out rows are the demo's
own (`validation.holdout_fraction`, chosen by `holdout_seed`, so every seed validates on the same
prompts). Runs on the GPU when there is one (`trainers.models.loading.default_device`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainers.demos.real import make_real_dataset, real_demo_spec, real_rubric  # noqa: E402
from trainers.models.pretrained import SMOLLM2, install  # noqa: E402

CRITERIA = tuple(criterion["name"] for criterion in real_rubric()["criteria"])


def validation_curve(points: list[tuple[int, dict[str, float]]]) -> list[tuple[int, dict[str, float]]]:
    return [(step, values) for step, values in points if "val/reward/mean" in values]


def one_run(model: str, data: Path, out: Path, engine: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from trainers.report import MemoryReporter
    from trainers.run.loop import train
    from trainers.spec import RunSpec

    optim: dict[str, Any] = {"seed": seed}
    if args.steps:
        optim["total_steps"] = args.steps
    if args.lr:
        optim["lr"] = args.lr
    overrides: dict[str, Any] = {"optim": optim, "rollout": {"engine": engine}}
    if args.every:
        overrides["validation"] = {"every_n_steps": args.every}
    spec = RunSpec.model_validate(real_demo_spec(model, data, out, **overrides))
    reporter = MemoryReporter()
    started = time.monotonic()
    train(spec, reporter)
    seconds = time.monotonic() - started
    curve = validation_curve(reporter.metric_points)
    first, last = curve[0][1], curve[-1][1]

    def summary(values: dict[str, float]) -> dict[str, float]:
        return {
            "reward": values["val/reward/mean"],
            "pass": values.get("val/pass@1", float("nan")),
            **{name: values.get(f"val/reward/{name}/mean", float("nan")) for name in CRITERIA},
        }

    return {
        "engine": engine,
        "seed": seed,
        "steps": spec.optim.total_steps,
        "seconds": seconds,
        "before": summary(first),
        "after": summary(last),
        "best_reward": max(values["val/reward/mean"] for _, values in curve),
        "curve": [(step, round(values["val/reward/mean"], 4)) for step, values in curve],
    }


def row(result: dict[str, Any]) -> str:
    b, a = result["before"], result["after"]
    cells = [f"{b[k]:.3f} -> {a[k]:.3f}" for k in ("reward", "pass", *CRITERIA)]
    return (
        f"{result['engine']:>12} seed {result['seed']}  "
        + "  ".join(f"{name} {cell}" for name, cell in zip(("reward", "pass", *CRITERIA), cells, strict=True))
        + f"  best {result['best_reward']:.3f}  {result['steps']} steps in {result['seconds'] / 60:.1f} min"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model folder (default: the packaged SmolLM2-135M-Instruct)")
    parser.add_argument("--models-dir", default=str(ROOT / "var" / "demo"), help="where to convert the packaged model")
    parser.add_argument("--engines", nargs="+", default=["transformers", "vllm"], choices=["transformers", "vllm"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, help="GRPO steps (default: the demo's)")
    parser.add_argument("--every", type=int, help="validate every N steps (default: the demo's)")
    parser.add_argument("--lr", type=float, help="learning rate (default: the demo's)")
    parser.add_argument("--json", help="also write every result (with the validation curves) to this file")
    args = parser.parse_args()

    model = args.model or str(install(SMOLLM2, args.models_dir))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data = make_real_dataset(Path(tmp) / "sums.jsonl")
        for engine in args.engines:
            for seed in args.seeds:
                result = one_run(model, data, Path(tmp) / f"{engine}-{seed}", engine, seed, args)
                print(row(result), flush=True)
                results.append(result)
    print()
    for engine in args.engines:
        mine = [r for r in results if r["engine"] == engine]
        mean = {
            when: {k: statistics.mean(r[when][k] for r in mine) for k in ("reward", "pass", *CRITERIA)}
            for when in ("before", "after")
        }
        print(
            f"{engine}: mean over {len(mine)} seeds: held-out reward {mean['before']['reward']:.3f} -> "
            f"{mean['after']['reward']:.3f}, pass {mean['before']['pass']:.3f} -> {mean['after']['pass']:.3f}, "
            f"correct {mean['before']['correct']:.3f} -> {mean['after']['correct']:.3f}; "
            f"{statistics.mean(r['seconds'] for r in mine) / 60:.1f} min per run"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
