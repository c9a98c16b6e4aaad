"""Seconds per GRPO step: our loop (`trainers.loop`) against TRL's `GRPOTrainer`, same machine.

    pip install "trl==0.25.1"        # for this benchmark only (not in requirements.txt);
                                     # 0.25.1 accepts transformers 4.57 and leaves torch alone
    python bench/trainer_vs_trl.py                  # both sizes
    python bench/trainer_vs_trl.py --sizes tiny --rounds 3 --steps 4

Same model (built by `trainers.tiny`, "tiny" ~1 M and "small" ~14 M parameters), same
prompts, same reward (our rubric, called from TRL through a reward function), same GRPO
settings: group size (num_generations), prompts per step, max new tokens, temperature 1,
top-p 1, no top-k, lr, AdamW betas, grad-norm clip 1.0, clip epsilon 0.2, one optimisation
pass (num_iterations=1), beta=0 (no reference model), GRPO loss (per-sequence token mean,
TRL loss_type="grpo"), group-std advantages, float32 (TRL's bf16 default turned off),
no gradient checkpointing (TRL turns it on by default), no vLLM, same micro-batch, same
torch thread count.

Fixed-length completions: both generate exactly `max_new_tokens` tokens per completion,
so both do the same amount of work. TRL gets `min_new_tokens = max_completion_length`
(EOS suppressed); our engine is given an end-of-sequence id that never occurs (EOS may
be sampled, generation just goes on). The printed token counts confirm it.

Ending at EOS (`--cases eos`, run after the fixed-length case by default): completions end
when the model samples EOS, at different lengths, as real ones do. A randomly initialised
model almost never samples its EOS, so the bench edits the model once, for both trainers:
every token's embedding gets one constant dimension and the (tied) EOS row a little more
in it, which raises EOS's logit by about the same amount at every position, so that EOS is
sampled with probability about `--eos-prob` per token (lengths roughly geometric, cut at
`max_new_tokens`). Neither side suppresses or replaces EOS; the printed mean lengths show
both did the same work.

The two run alternately (ours, TRL, ours, TRL, ...) in rounds of `--steps` steps; each
round starts from a fresh trainer and its first step is a warm-up that is not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INSTALL_HINT = 'TRL is needed for this benchmark only: pip install "trl==0.25.1"'
QUESTIONS = [
    "What is 12 + 7?",
    "Repeat the letter: k",
    "What is 3 + 45?",
    "Say yes or no: is ten more than two?",
    "Count to five.",
    "Repeat the letter: q",
    "What is 60 + 9?",
    "Write the word seven.",
]


def write_dataset(path: Path, n_prompts: int) -> Path:
    rows = [{"prompt": QUESTIONS[i % len(QUESTIONS)], "answer": "a"} for i in range(n_prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_spec(model_dir: Path, data_path: Path, out_dir: Path, args: argparse.Namespace):
    from trainers.spec import RunSpec

    return RunSpec.model_validate(
        {
            "name": "bench",
            "model": {"path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
            "data": {"path": str(data_path), "shuffle": False},
            "rubric": {"criteria": [{"name": "has_a", "kind": "contains", "params": {"keywords": ["a", "e"]}}]},
            "algorithm": {
                "group_size": args.group_size,
                "advantage_estimator": "grpo",
                "policy_loss": "ppo_clip",
                "loss_agg_mode": "seq-mean-token-mean",
                "clip_ratio_low": 0.2,
                "clip_ratio_high": 0.2,
                "kl_beta": 0.0,
                "ppo_epochs": 1,
            },
            "rollout": {
                "engine": "transformers",
                "max_new_tokens": args.max_new_tokens,
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": 0,
                "generation_batch_size": args.prompts * args.group_size,
            },
            "optim": {
                "lr": 1e-5,
                "prompts_per_step": args.prompts,
                "micro_batch_size": args.micro_batch,
                "total_steps": 10_000,
                "max_grad_norm": 1.0,
                "seed": 0,
            },
            "checkpoint": {"output_dir": str(out_dir), "save_final": False},
        }
    )


# --- ours ------------------------------------------------------------------------------------


def run_ours(spec, steps: int, fixed_length: bool) -> tuple[list[tuple[float, float]], list[dict[str, float]]]:
    """(wall, CPU) seconds and metrics of `steps` steps of a fresh trainer, warm-up included."""
    from trainers.loop import Trainer
    from trainers.report import MemoryReporter

    trainer = Trainer(spec, MemoryReporter())
    if fixed_length:
        trainer.engine.eos_ids = [-1]  # never sampled: every completion runs to max_new_tokens
    generate = trainer.engine.generate
    gen_cpu = [0.0]

    def timed_generate(*a, **kw):  # the loop times phases on the wall clock; the CPU split is taken here
        c0 = time.process_time()
        try:
            return generate(*a, **kw)
        finally:
            gen_cpu[0] += time.process_time() - c0

    trainer.engine.generate = timed_generate
    times, metrics = [], []
    try:
        for _ in range(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            gen_cpu[0] = 0.0
            metrics.append(trainer.step() | {"cpu/generate_s": gen_cpu[0]})
            times.append((time.perf_counter() - t0, time.process_time() - c0))
    finally:
        trainer.close()
    return times, metrics


# --- TRL -------------------------------------------------------------------------------------


def run_trl(
    spec, model_dir: Path, out_dir: Path, steps: int, fixed_length: bool
) -> tuple[list[tuple[float, float]], list[int]]:
    """(wall, CPU) seconds and completion token counts of `steps` optimiser steps of a fresh GRPOTrainer."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainers.rewards.rubric import Rubric
    from trainers.rewards.sample import Sample

    rubric = Rubric.from_spec(spec.rubric)

    def rubric_reward(prompts, completions, answer, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        samples = [
            Sample(prompt=p, completion=t, fields={"answer": a}) for p, t, a in zip(prompts, texts, answer, strict=True)
        ]
        return [r.reward for r in rubric.score(samples)]

    rows = [json.loads(line) for line in Path(spec.data.path).read_text().splitlines()]
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["prompt"]}], "answer": r["answer"]} for r in rows]
    )
    total = spec.optim.prompts_per_step * spec.algorithm.group_size
    config = GRPOConfig(
        output_dir=str(out_dir),
        max_steps=steps,
        learning_rate=spec.optim.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=spec.optim.beta1,
        adam_beta2=spec.optim.beta2,
        max_grad_norm=spec.optim.max_grad_norm,
        per_device_train_batch_size=spec.optim.micro_batch_size,
        gradient_accumulation_steps=total // spec.optim.micro_batch_size,
        num_generations=spec.algorithm.group_size,
        max_prompt_length=spec.data.max_prompt_tokens,
        max_completion_length=spec.rollout.max_new_tokens,
        temperature=spec.rollout.temperature,
        top_p=spec.rollout.top_p,
        top_k=None,
        generation_kwargs={"min_new_tokens": spec.rollout.max_new_tokens} if fixed_length else None,
        beta=0.0,
        epsilon=spec.algorithm.clip_ratio_low,
        num_iterations=1,
        loss_type="grpo",
        scale_rewards="group",
        gradient_checkpointing=False,
        bf16=False,
        fp16=False,
        use_cpu=not torch.cuda.is_available(),
        use_vllm=False,
        shuffle_dataset=False,
        save_strategy="no",
        report_to="none",
        logging_steps=10_000,
        disable_tqdm=True,
        seed=spec.optim.seed,
        dataloader_num_workers=0,
    )

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.starts: list[tuple[float, float]] = []
            self.ends: list[tuple[float, float]] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.starts.append((time.perf_counter(), time.process_time()))

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append((time.perf_counter(), time.process_time()))

    timer = StepTimer()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # TRL hands every tokenizer output to generate
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rubric_reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    lengths: list[int] = []
    original = trainer._generate_and_score_completions

    def counting(inputs):  # record how many tokens each completion got
        out = original(inputs)
        lengths.extend(out["completion_mask"].sum(-1).tolist())
        return out

    trainer._generate_and_score_completions = counting
    trainer.train()
    rubric.close()
    # on_step_begin fires at the first micro-batch of the accumulation window, which is when
    # TRL generates the whole window's completions: begin -> end is the full GRPO step.
    times = [(e[0] - s[0], e[1] - s[1]) for s, e in zip(timer.starts, timer.ends, strict=True)]
    return times, [int(n) for n in lengths]


# --- driver ----------------------------------------------------------------------------------


def make_eos_likely(model_dir: Path, eos_prob: float) -> None:
    """Edit the saved model so that it samples EOS with probability about `eos_prob` per token
    (see the module docstring): embedding column 0 becomes a constant that dominates the
    residual stream, so after the final RMSNorm it is about the same at every position, and
    the tied EOS row gets more in that column: as much as makes EOS's mean probability over
    random token sequences `eos_prob` (found by a few secant steps on the log-odds)."""
    import math

    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert model.config.tie_word_embeddings, "the edit relies on tied input/output embeddings"
    eos, vocab = model.config.eos_token_id, model.config.vocab_size
    emb = model.get_input_embeddings().weight
    probe = torch.randint(0, vocab, (8, 64), generator=torch.Generator().manual_seed(0))
    target = math.log(eos_prob / (1 - eos_prob))

    def log_odds(extra: float) -> float:
        with torch.no_grad():
            emb[:, 0] = 4.0
            emb[eos, 0] += extra
            p = model(probe).logits.softmax(-1)[..., eos].mean().item()
        return math.log(p / (1 - p))

    lo, hi = 0.0, 1.0
    f_lo, f_hi = log_odds(lo), log_odds(hi)
    for _ in range(8):
        if abs(f_hi - target) < 1e-3:
            break
        x = hi + (target - f_hi) * (hi - lo) / (f_hi - f_lo)
        lo, f_lo, hi, f_hi = hi, f_hi, x, log_odds(x)
    model.save_pretrained(model_dir)


def bench_size(size: str, case: str, args: argparse.Namespace, work: Path) -> dict[str, float]:
    from trainers.tiny import build_tiny_model, count_parameters

    fixed_length = case == "fixed"
    model_dir = build_tiny_model(work / f"model-{size}-{case}", size=size, seed=0)
    if not fixed_length:
        make_eos_likely(model_dir, args.eos_prob)
    data = write_dataset(work / f"data-{size}.jsonl", args.prompts)
    spec = make_spec(model_dir, data, work / f"ours-{size}-{case}", args)
    from transformers import AutoModelForCausalLM

    params = count_parameters(AutoModelForCausalLM.from_pretrained(model_dir))
    lengths_note = (
        f"x {args.max_new_tokens} new tokens"
        if fixed_length
        else f"x up to {args.max_new_tokens} tokens, ending at EOS"
    )
    print(
        f"\n== {size}, {case}: {params / 1e6:.1f} M parameters, {args.prompts} prompts x {args.group_size} completions"
        f" {lengths_note}, micro-batch {args.micro_batch}, {args.threads} threads =="
    )
    ours: list[tuple[float, float]] = []
    trl: list[tuple[float, float]] = []
    phases: dict[str, list[float]] = {
        "timing/generate_s": [],
        "timing/score_s": [],
        "timing/train_s": [],
        "cpu/generate_s": [],
    }
    for r in range(args.rounds):
        times, metrics = run_ours(spec, args.steps + 1, fixed_length)
        ours += times[1:]
        for m in metrics[1:]:
            for k in phases:
                phases[k].append(m[k])
        mean = statistics.mean(m["response/length_mean"] for m in metrics)
        top = max(int(m["response/length_max"]) for m in metrics)
        print(f"  round {r + 1} ours: {fmt(times[1:])}  (tokens/completion: mean {mean:.1f}, max {top})")
        t_times, t_lengths = run_trl(spec, model_dir, work / f"trl-{size}-{case}-{r}", args.steps + 1, fixed_length)
        trl += t_times[1:]
        print(
            f"  round {r + 1} TRL:  {fmt(t_times[1:])}"
            f"  (tokens/completion: mean {statistics.mean(t_lengths):.1f}, max {max(t_lengths)})"
        )
    result = {}
    for clock, i in (("wall", 0), ("cpu", 1)):
        ours_s, trl_s = statistics.median(t[i] for t in ours), statistics.median(t[i] for t in trl)
        result[clock] = (ours_s, trl_s)
        print(f"  {clock:>4}: ours {ours_s:.3f} s/step, TRL {trl_s:.3f} s/step (medians of {len(ours)}), "
              f"ours / TRL = {ours_s / trl_s:.2f}   (goal: <= 0.50)")  # fmt: skip
    print(
        "  ours by phase (median s): "
        + ", ".join(f"{k.split('/')[1]} {statistics.median(v):.3f} {k.split('/')[0]}" for k, v in phases.items())
    )
    ours_s, trl_s = result[args.clock]
    return {"ours_s": ours_s, "trl_s": trl_s, "ratio": ours_s / trl_s}


def fmt(times: list[tuple[float, float]]) -> str:
    return " ".join(f"{w:.2f}" for w, _ in times) + " s/step wall; " + " ".join(f"{c:.2f}" for _, c in times) + " CPU"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="tiny,small", help="comma-separated trainers.tiny sizes")
    p.add_argument(
        "--cases",
        default="fixed,eos",
        help="comma-separated: fixed (every completion max-new-tokens long), eos (completions end at EOS)",
    )
    p.add_argument("--eos-prob", type=float, default=0.03, help="per-token EOS probability in the eos case")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=16, help="sequences per forward/backward in both")
    p.add_argument("--rounds", type=int, default=2, help="alternations of ours and TRL")
    p.add_argument("--steps", type=int, default=3, help="counted steps per round (after one warm-up step)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for both")
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="which clock the summary ratio uses; cpu (process time) resists other load on the machine, "
        "best with --threads 1",
    )
    args = p.parse_args(argv)

    try:
        import trl
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
          f"device {'cuda' if torch.cuda.is_available() else 'cpu'}")  # fmt: skip
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as tmp:
        for case in args.cases.split(","):
            for size in args.sizes.split(","):
                results[f"{size} {case}"] = bench_size(size, case, args, Path(tmp))
    print(
        f"\nsummary ({args.clock} s/step): "
        + "; ".join(
            f"{s}: ours {r['ours_s']:.2f}s, TRL {r['trl_s']:.2f}s, ratio {r['ratio']:.2f}" for s, r in results.items()
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
