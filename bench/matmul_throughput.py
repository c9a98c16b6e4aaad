"""This machine's matrix-multiply throughput at the trainer bench's shapes, and each case's compute floor.

    python bench/matmul_throughput.py                 # 2 threads, as bench/trainer_vs_trl.py uses
    python bench/matmul_throughput.py --threads 1

Part 1 measures GFLOP/s of `torch.mm` in float32 and bfloat16 on every linear layer's shape of
the three models in `bench/trainer_vs_trl.py` (hidden x hidden attention projections, hidden x
intermediate MLP, hidden x vocabulary LM head), at two row counts:

- training: the tokens of one micro-batch (forward X @ W^T, and the backward's two products,
  dY @ W for the input's gradient and dY^T @ X for the weight's);
- decoding: the rows still generating (one token each per step: a thin product that reads the
  whole weight for few rows, so memory-bound).

Part 2 turns that into a floor per GRPO step for each bench case: the least time the matrix
multiplies of one step can take here, from the FLOPs written out below, counting only useful
tokens (no padding) and skipping everything that is not a linear layer (attention scores,
norms, softmax, the optimiser), so a real step can only be slower. With N_l = L (4h^2 + 3hi)
parameters in the layers and N_h = hV in the LM head (tied: the input embedding is a lookup),
per token:

    generation   2 (N_l + N_h)  FLOPs   (one forward per sampled token; prompts prefilled once per group)
    training     6 (N_l + N_h)  FLOPs   (forward 2N, backward 4N: input and weight gradients)

each at the throughput measured for its shape and row count; decoding sums over the steps of
the longest completion with the rows still active at each step (fixed: all; eos: geometric
survival; real shapes: `--short-frac` of the rows short, the rest to the limit, as the bench's edits make them).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = {  # hidden, intermediate, layers, vocabulary: as bench/trainer_vs_trl.py builds them
    "tiny": (128, 384, 4, 768),
    "small": (384, 1024, 8, 768),
    "real": (512, 1536, 4, 151_936),
}
DECODE_ROWS = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class Case:
    name: str
    model: str
    prompts: int
    group: int
    max_new: int
    micro_batch: int
    survival: str  # how many rows are still generating after t tokens: "fixed", "eos", "real"


CASES = [
    Case("tiny fixed", "tiny", 8, 8, 64, 16, "fixed"),
    Case("small fixed", "small", 8, 8, 64, 16, "fixed"),
    Case("tiny eos", "tiny", 8, 8, 64, 16, "eos"),
    Case("small eos", "small", 8, 8, 64, 16, "eos"),
    Case("real shapes", "real", 4, 8, 512, 8, "real"),
]


def layer_shapes(model: str) -> list[tuple[str, int, int, int]]:
    """(name, in, out, count per forward) of every linear layer."""
    h, i, layers, vocab = MODELS[model]
    return [("attn h x h", h, h, 4 * layers), ("mlp h x i", h, i, 2 * layers), ("mlp i x h", i, h, layers),
            ("lm head h x V", h, vocab, 1)]  # fmt: skip


def seconds(fn, min_time: float = 0.3, min_calls: int = 5) -> float:
    """Best time of fn() over at least `min_calls` calls and `min_time` seconds (after a warm-up call):
    the best call is the one least slowed by other work on a shared machine."""
    fn()
    best, spent, calls = math.inf, 0.0, 0
    while spent < min_time or calls < min_calls:
        calls += 1
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
    return best


def products(rows: int, k: int, n: int, dtype: torch.dtype, backward: bool) -> tuple[float, float]:
    """(seconds, FLOPs) of the forward product, plus the backward's two when asked."""
    x, w, dy = torch.randn(rows, k, dtype=dtype), torch.randn(n, k, dtype=dtype), torch.randn(rows, n, dtype=dtype)
    t = seconds(lambda: torch.mm(x, w.t()))
    if backward:
        t += seconds(lambda: torch.mm(dy, w)) + seconds(lambda: torch.mm(dy.t(), x))
    return t, 2.0 * rows * k * n * (3 if backward else 1)


def prompt_lengths(prompts: int) -> list[int]:
    """Token counts of the bench's prompts under the tiny tokenizer's chat template."""
    from bench.trainer_vs_trl import QUESTIONS
    from trainers.demos.tiny import synthetic_corpus, train_tokenizer

    tok = train_tokenizer(synthetic_corpus(0))
    msgs = [[{"role": "user", "content": QUESTIONS[j % len(QUESTIONS)]}] for j in range(prompts)]
    return [len(tok.apply_chat_template(m, add_generation_prompt=True)["input_ids"]) for m in msgs]


def active_rows(case: Case, t: int, eos_prob: float, short_frac: float = 0.75) -> float:
    """Expected rows still generating at decode step t (0-based): those with length > t."""
    n = case.prompts * case.group
    if case.survival == "fixed":
        return float(n)
    if case.survival == "eos":
        return n * (1 - eos_prob) ** t
    return n * (short_frac * (1 - 1 / 16) ** t + 1 - short_frac)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--eos-prob", type=float, default=0.03, help="as bench/trainer_vs_trl.py --eos-prob")
    p.add_argument("--short-frac", type=float, default=0.75,
                   help="real shapes: share of completions that end near 16 tokens (the bench prints it)")  # fmt: skip
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads")

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    # Part 1: the throughput table.
    train_rows = {}
    for case in CASES:
        plen = statistics.mean(prompt_lengths(case.prompts))
        mean_len = sum(min(1.0, active_rows(case, t, args.eos_prob, args.short_frac) / (case.prompts * case.group))
                       for t in range(case.max_new))  # fmt: skip
        train_rows[case.name] = (plen, mean_len, round(case.micro_batch * (plen + mean_len)))
    print("\nGFLOP/s of torch.mm (training: forward + both backward products at a micro-batch's tokens; "
          "decoding: forward at 32 rows)")  # fmt: skip
    print(f"{'model':<6} {'shape':<15} {'train rows':>10} {'f32 train':>10} {'bf16 train':>10} "
          f"{'f32 dec32':>10} {'bf16 dec32':>10}")  # fmt: skip
    timing: dict[tuple, float] = {}  # (model, shape, dtype, rows, backward) -> seconds per call
    for model in MODELS:
        rows = max(r for name, (_, _, r) in train_rows.items() if name.startswith(model))
        for name, k, n, _ in layer_shapes(model):
            cells = []
            for label, dtype in dtypes.items():
                t, f = products(rows, k, n, dtype, backward=True)
                timing[(model, name, label, "train")] = f / t  # FLOP/s
                cells.append(f / t / 1e9)
            for label, dtype in dtypes.items():
                for r in DECODE_ROWS:
                    t, f = products(r, k, n, dtype, backward=False)
                    timing[(model, name, label, r)] = t  # seconds per decode product
                cells.append(2.0 * 32 * k * n / timing[(model, name, label, 32)] / 1e9)
            print(f"{model:<6} {name:<15} {rows:>10} " + " ".join(f"{c:>10.1f}" for c in cells))

    # Part 2: the floor per step.
    print("\ncompute floor per GRPO step (s): matrix multiplies of useful tokens only, at the rates above")
    print(f"{'case':<12} {'prompt':>6} {'mean len':>8} {'GFLOP gen':>9} {'GFLOP train':>11} "
          f"{'f32 gen':>8} {'f32 train':>9} {'f32 step':>8} {'bf16 gen':>8} {'bf16 train':>10} {'bf16 step':>9}")  # fmt: skip
    for case in CASES:
        plen, mean_len, _ = train_rows[case.name]
        n_rows = case.prompts * case.group
        shapes = layer_shapes(case.model)
        params = sum(k * n * c for _, k, n, c in shapes)
        gen_tokens = n_rows * mean_len + case.prompts * plen  # each prompt prefilled once for its group
        train_tokens = n_rows * mean_len + case.prompts * plen  # the prompt runs once per group in training too
        cells = []
        for label in dtypes:
            gen = 0.0
            for t in range(case.max_new):
                a = active_rows(case, t, args.eos_prob, args.short_frac)
                if a < 0.5:
                    break
                gen += sum(c * interpolate(timing, case.model, name, label, a) for name, _, _, c in shapes)
            # prefill: one forward over each prompt, at about the training rate
            gen += sum(2.0 * case.prompts * plen * k * n * c / timing[(case.model, name, label, "train")]
                       for name, k, n, c in shapes)  # fmt: skip
            train = sum(6.0 * train_tokens * k * n * c / timing[(case.model, name, label, "train")]
                        for name, k, n, c in shapes)  # fmt: skip
            cells += [gen, train, gen + train]
        print(f"{case.name:<12} {plen:>6.1f} {mean_len:>8.1f} {2 * params * gen_tokens / 1e9:>9.1f} "
              f"{6 * params * train_tokens / 1e9:>11.1f} " + " ".join(f"{c:>8.2f}" for c in cells))  # fmt: skip
    return 0


def interpolate(timing: dict, model: str, name: str, dtype: str, rows: float) -> float:
    """Seconds of one decode product at `rows` rows, linear between the measured row counts."""
    lo = max((r for r in DECODE_ROWS if r <= rows), default=DECODE_ROWS[0])
    hi = min((r for r in DECODE_ROWS if r >= rows), default=DECODE_ROWS[-1])
    t_lo, t_hi = timing[(model, name, dtype, lo)], timing[(model, name, dtype, hi)]
    return t_lo if hi == lo else t_lo + (t_hi - t_lo) * (rows - lo) / (hi - lo)


if __name__ == "__main__":
    raise SystemExit(main())
