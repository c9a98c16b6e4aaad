"""Training forward + backward over one step's batch with each micro-batching mode
(`optim.micro_batching`: padded, balanced, packed), at skewed completion lengths.

    OMP_NUM_THREADS=1 python bench/micro_batching.py                      # both length cases, both vocabularies
    OMP_NUM_THREADS=1 python bench/micro_batching.py --vocabs 1024 --repeats 3

The batch is what a GRPO step trains on: `--prompts` prompts of 24-40 tokens x `--group`
completions each (the samples of a group share their prompt). Two length cases:
- bimodal: half of each group's completions are 16 tokens, half 512;
- spread: lengths log-uniform between 16 and 512.
The model is a randomly initialised Llama of hidden size `--hidden` built from a config (no
download); with a 151,936-token vocabulary (Qwen's) the head runs in chunks of `--chunk-tokens`.
The work per mode is the loop's: for each micro-batch, completion logprobs and entropy, a
token-mean loss, backward. It prints CPU seconds (process time: the machine is shared) and wall
seconds per pass, the minimum over `--repeats` passes after a warm-up pass, and the share of the
padded layout's tokens that are padding.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_model(vocab: int, args: argparse.Namespace):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 64,
        num_key_value_heads=args.hidden // 64,
        intermediate_size=args.hidden * 8 // 3,
        max_position_embeddings=2048,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config).train()


def completion_lengths(case: str, n: int, rng: random.Random) -> list[int]:
    if case == "bimodal":
        return [16 if i % 2 == 0 else 512 for i in range(n)]
    return [round(math.exp(rng.uniform(math.log(16), math.log(512)))) for _ in range(n)]


def make_batch(case: str, vocab: int, args: argparse.Namespace):
    from trainers.update.batches import TokenBatch

    rng = random.Random(0)
    prompts, completions = [], []
    for _ in range(args.prompts):
        prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(24, 40))]
        for n in completion_lengths(case, args.group, rng):
            prompts.append(prompt)
            completions.append([rng.randrange(3, vocab) for _ in range(n)])
    return TokenBatch.build(prompts, completions, pad_id=0)


def one_pass(model, batch, micro_batching, chunk_tokens: int) -> None:
    """The loop's training pass: every micro-batch forward (logprobs + entropy) and backward."""
    from trainers.update.logprobs import token_logprobs

    total = batch.completion_mask.sum()
    for rows in micro_batching.split(batch):
        mb = batch.select(rows)
        logp, entropy = token_logprobs(
            model, mb, with_entropy=True, chunk_tokens=chunk_tokens, pack_tokens=micro_batching.pack_tokens
        )
        loss = -(logp * mb.completion_mask).sum() / total
        loss.backward()
    model.zero_grad(set_to_none=True)


def timed(model, batch, micro_batching, chunk_tokens: int, repeats: int) -> tuple[float, float]:
    one_pass(model, batch, micro_batching, chunk_tokens)  # warm-up
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        one_pass(model, batch, micro_batching, chunk_tokens)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def padding_share(batch, micro_batching) -> float:
    """Share of the token positions the forward computes that are padding (prompt sharing aside)."""
    real = int(batch.attention_mask.sum())
    if micro_batching.mode == "packed":
        from trainers.update.packing import PackedRows

        computed = sum(
            PackedRows.build(batch.select(rows), row_tokens=micro_batching.tokens).input_ids.numel()
            for rows in micro_batching.split(batch)
        )
    else:
        computed = sum(batch.select(rows).input_ids.numel() for rows in micro_batching.split(batch))
    return 1 - real / computed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="bimodal,spread")
    parser.add_argument("--vocabs", default="1024,151936")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--micro-batch-size", type=int, default=8, help="sequences per pass, padded mode")
    parser.add_argument("--tokens", default="2048,4096", help="token budgets tried for balanced and packed")
    parser.add_argument("--chunk-tokens", type=int, default=1024, help="head chunk for vocabularies over 32k")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch

    from trainers.update.micro_batching import MicroBatching

    print(f"torch threads {torch.get_num_threads()}, hidden {args.hidden}, layers {args.layers}, "
          f"{args.prompts} prompts x {args.group} completions")  # fmt: skip
    budgets = [int(t) for t in args.tokens.split(",")]
    modes = [MicroBatching("padded", size=args.micro_batch_size)]
    modes += [MicroBatching(mode, tokens=t) for mode in ("balanced", "packed") for t in budgets]
    print(
        f"{'vocab':>7} {'case':>8} {'mode':>16} {'passes':>6} {'padding':>8} {'cpu s':>7} {'wall s':>7} {'vs padded':>9}"
    )
    for vocab in (int(v) for v in args.vocabs.split(",")):
        model = make_model(vocab, args)
        chunk = args.chunk_tokens if vocab > 32_768 else 0
        for case in args.cases.split(","):
            batch = make_batch(case, vocab, args)
            base = None
            for mb in modes:
                cpu, wall = timed(model, batch, mb, chunk, args.repeats)
                base = base or cpu
                name = mb.mode if mb.mode == "padded" else f"{mb.mode}@{mb.tokens}"
                print(f"{vocab:>7} {case:>8} {name:>16} {len(mb.split(batch)):>6} {padding_share(batch, mb):>8.1%} "
                      f"{cpu:>7.2f} {wall:>7.2f} {cpu / base:>9.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
