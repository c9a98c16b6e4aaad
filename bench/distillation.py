"""On-policy distillation on the demo task: a tiny student distilled from a teacher (the same tiny model first
trained with GRPO on the task), against the same student trained with GRPO on the rubric alone for as many
steps, and TRL's DistillationTrainer (its on-policy reverse KL, beta 1.0, from the two models' full logits)
where it runs here.

1. teacher: `--teacher-steps` GRPO steps of the demo (trainers.demos.demo) from the tiny model;
2. student: the tiny model at its initial weights (same tokenizer), `--steps` steps of pure distillation
   (teacher section, algorithm.reward_advantage_weight 0: the rubric is scored, not trained on);
3. baseline: the same student, `--steps` GRPO steps on the rubric;
4. TRL (`--trl`): DistillationTrainer on the same prompts, `--steps` steps, its model evaluated by the studio.

Each model is evaluated on the held-out phrasings (trainers.demos.demo.HELD_OUT_PROMPTS), 16 samples per
prompt. Prints the reverse KL to the teacher over the steps and the rewards side by side.

    python bench/distillation.py
    python bench/distillation.py --teacher-steps 120 --steps 40 --trl
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainers.demos.demo import HELD_OUT_PROMPTS, PROMPT, demo_spec, make_demo_dataset  # noqa: E402
from trainers.demos.tiny import build_tiny_model  # noqa: E402
from trainers.report import MemoryReporter  # noqa: E402
from trainers.run.evaluate import evaluate  # noqa: E402
from trainers.run.loop import train  # noqa: E402
from trainers.spec import RunSpec  # noqa: E402


def held_out_reward(spec: RunSpec, checkpoint: str | None, folder: Path) -> float:
    held = spec.model_copy(deep=True)
    held.data.path = str(make_demo_dataset(folder / "held_out.jsonl", prompts=HELD_OUT_PROMPTS))
    held.eval.checkpoint = checkpoint
    held.eval.samples_per_prompt = 16
    return evaluate(held, MemoryReporter()).metrics["eval/reward/mean"]


def run(config: dict[str, Any]) -> tuple[RunSpec, MemoryReporter, str | None, float]:
    spec = RunSpec.model_validate(config)
    reporter = MemoryReporter()
    started = time.perf_counter()
    result = train(spec, reporter)
    assert result.status == "succeeded", reporter.states
    return spec, reporter, result.checkpoint, time.perf_counter() - started


def trl_distillation(student: Path, teacher: str, data: Path, out: Path, steps: int, lr: float) -> float:
    """TRL's DistillationTrainer (on-policy, reverse KL), `steps` steps; its seconds. Saves to `out`."""
    import json

    from datasets import Dataset
    from trl import DistillationConfig, DistillationTrainer

    rows = [json.loads(line) for line in data.read_text().splitlines()]
    # As many prompts as the steps draw (8 a step): the trainer ends at the end of its data.
    prompts = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in rows]
    dataset = Dataset.from_list([prompts[i % len(prompts)] for i in range(8 * steps)])
    args = DistillationConfig(
        output_dir=str(out), max_steps=steps, learning_rate=lr, per_device_train_batch_size=8,
        gradient_accumulation_steps=1, max_completion_length=8, temperature=1.0, beta=1.0, report_to=[],
        logging_steps=max(1, steps // 5), save_strategy="no", use_cpu=True, lr_scheduler_type="constant",
        warmup_steps=0, max_grad_norm=1.0, seed=0, bf16=False,
    )  # fmt: skip
    started = time.perf_counter()
    trainer = DistillationTrainer(model=str(student), teacher_model=teacher, args=args, train_dataset=dataset)
    trainer.train()
    trainer.save_model(str(out))
    trainer.processing_class.save_pretrained(str(out))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher-steps", type=int, default=120)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--coef", type=float, default=1.0, help="algorithm.distill_coef")
    parser.add_argument("--signals", nargs="+", default=["reverse_kl", "reverse_kl_centered"],
                        help="algorithm.distill_signal values to run")  # fmt: skip
    parser.add_argument("--trl", action="store_true", help="also TRL's DistillationTrainer")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # a 1 M-parameter model gains nothing from a second thread (tests/trainers/test_learning.py)
    tmp = Path(tempfile.mkdtemp(prefix="distill-bench-"))
    tiny = build_tiny_model(tmp / "tiny", seed=0)
    data = make_demo_dataset(tmp / "letters.jsonl")

    teacher_spec, _, teacher_ckpt, teacher_s = run(
        demo_spec(tiny, data, tmp / "teacher", optim={"total_steps": args.teacher_steps})
    )
    assert teacher_ckpt is not None
    base_reward = held_out_reward(teacher_spec, None, tmp)
    teacher_reward = held_out_reward(teacher_spec, teacher_ckpt, tmp)
    print(f"teacher: {args.teacher_steps} GRPO steps in {teacher_s:.0f} s; held-out reward {base_reward:.3f} -> "
          f"{teacher_reward:.3f}")  # fmt: skip

    teacher = {"teachers": [{"name": "grpo", "path": teacher_ckpt}]}
    results = []
    for signal in args.signals:
        distill = demo_spec(tiny, data, tmp / f"distill-{signal}", optim={"total_steps": args.steps}, teacher=teacher,
                            algorithm={"reward_advantage_weight": 0.0, "distill_coef": args.coef,
                                       "distill_signal": signal})  # fmt: skip
        d_spec, d_rep, d_ckpt, d_s = run(distill)
        results.append((signal, d_rep, held_out_reward(d_spec, d_ckpt, tmp), d_s))
    g_spec, g_rep, g_ckpt, g_s = run(demo_spec(tiny, data, tmp / "grpo", optim={"total_steps": args.steps}))
    g_reward = held_out_reward(g_spec, g_ckpt, tmp)

    every = max(1, args.steps // 10)
    for signal, d_rep, _, _ in results:
        kl = d_rep.series("distill/reverse_kl")
        print(f"\nstudent, pure distillation ({signal}): reverse KL to the teacher every {every} steps: "
              + " ".join(f"{x:.3f}" for x in kl[::every]) + f" ... {kl[-1]:.3f}")  # fmt: skip
        print("  its training reward (rubric scored, not trained on): "
              + " ".join(f"{x:.2f}" for x in d_rep.series("reward/mean")[::every]))  # fmt: skip
    print("GRPO student's training reward:                         "
          + " ".join(f"{x:.2f}" for x in g_rep.series("reward/mean")[::every]))  # fmt: skip
    print(f"\n{'held-out reward (16 samples x 12 prompts)':<48}{'reward':>8}{'seconds':>9}")
    print(f"{'initial student':<48}{base_reward:>8.3f}")
    print(f"{f'teacher ({args.teacher_steps} GRPO steps)':<48}{teacher_reward:>8.3f}{teacher_s:>9.0f}")
    for signal, _, d_reward, d_s in results:
        print(f"{f'studio: distilled ({signal}), {args.steps} steps':<48}{d_reward:>8.3f}{d_s:>9.0f}")
    print(f"{f'studio: GRPO on the rubric, {args.steps} steps':<48}{g_reward:>8.3f}{g_s:>9.0f}")
    if args.trl:
        try:
            t_s = trl_distillation(tiny, teacher_ckpt, data, tmp / "trl", args.steps, lr=2e-3)
            t_reward = held_out_reward(g_spec, str(tmp / "trl"), tmp)
            print(f"{f'TRL DistillationTrainer, {args.steps} steps':<48}{t_reward:>8.3f}{t_s:>9.0f}")
        except Exception as exc:  # say why the peer did not run, keep the studio's numbers
            print(f"TRL DistillationTrainer did not run here: {type(exc).__name__}: {exc}")
    print(f"\n(prompt template: {PROMPT!r}; folder {tmp})")


if __name__ == "__main__":
    main()
