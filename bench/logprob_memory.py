"""Peak memory and time of one training forward + backward of the completion logprobs, with the
LM head over whole logits or in chunks of positions (what `optim.logprob_chunk_mib` sets through the
vocabulary: `trainers.update.logprobs.chunk_tokens_for`), in float32 or bfloat16
autocast (`optim.precision`).

    python bench/logprob_memory.py                       # 151,936 vocab, hidden 512, B=8, T=512
    python bench/logprob_memory.py --vocab 768 --hidden 128 --layers 4 --heads 4 --tokens 64 \\
        --chunks 0,256,1024                              # the tiny model's shapes

Each case runs in a fresh subprocess, so its peak resident memory (ru_maxrss) is its own:
`base` is the resident size once the model and batch exist, `peak` the most during the steps,
`step` their difference (what the forward + backward added). A step is what the trainer does per
micro-batch: `token_logprobs(with_entropy=True)` under `trainers.update.precision.autocast`, a loss
summed from the logprobs, backward. The model is a randomly initialised Llama (tied embeddings),
prompts of `--prompt` tokens and completions of `--tokens` tokens, all distinct (no padding).
Times are medians over `--steps` steps after one warm-up step: wall clock and process CPU time.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_case(args: argparse.Namespace) -> dict:
    """One case in this process: build, warm up, time `args.steps` steps; returns its numbers."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(ROOT))
    from trainers.update.batches import TokenBatch
    from trainers.update.logprobs import token_logprobs
    from trainers.update.precision import autocast

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 3,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.prompt + args.tokens + 8,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config).train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(8, args.vocab, (args.batch, args.prompt + args.tokens), generator=gen).tolist()
    batch = TokenBatch.build([r[: args.prompt] for r in ids], [r[args.prompt :] for r in ids], pad_id=0)
    base = rss_mib()
    walls, cpus = [], []
    for step in range(args.steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        with autocast(model, args.precision):
            logp, entropy = token_logprobs(model, batch, with_entropy=True, chunk_tokens=args.chunk)
        loss = -(logp * batch.completion_mask).sum() / batch.completion_mask.sum()
        loss.backward()
        model.zero_grad(set_to_none=True)
        if step > 0:  # the first step is a warm-up
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    peak = rss_mib()
    return {
        "chunk": args.chunk,
        "precision": args.precision,
        "base_mib": base,
        "peak_mib": peak,
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
        "loss": loss.item(),
        "entropy": float((entropy * batch.completion_mask).sum() / batch.completion_mask.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8, help="sequences in the micro-batch")
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens per sequence")
    parser.add_argument("--tokens", type=int, default=512, help="completion tokens per sequence")
    parser.add_argument("--chunks", default="0,1024,4096", help="chunk_tokens values; 0 = whole logits")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per case, after one warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--case", action="store_true", help=argparse.SUPPRESS)  # run one case, print JSON
    parser.add_argument("--chunk", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args)))
        return

    shared = [f"--{k}={getattr(args, k)}" for k in ("vocab", "hidden", "layers", "heads", "batch", "prompt", "tokens")]
    shared += [f"--steps={args.steps}", f"--threads={args.threads}"]
    print(
        f"vocab {args.vocab}, hidden {args.hidden}, {args.layers} layers, B={args.batch}, "
        f"prompt {args.prompt} + completion {args.tokens} tokens, {args.threads} threads, "
        f"median of {args.steps} steps after a warm-up"
    )
    header = f"{'precision':>9} {'chunk':>6} {'base MiB':>9} {'peak MiB':>9} {'step MiB':>9} {'wall s':>7} {'cpu s':>7} {'loss':>9}"
    print(header)
    for precision in args.precisions.split(","):
        for chunk in (int(c) for c in args.chunks.split(",")):
            cmd = [sys.executable, __file__, "--case", f"--chunk={chunk}", f"--precision={precision}", *shared]
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                print(f"{precision:>9} {chunk:>6} failed (exit {out.returncode}): {out.stderr.strip()[-300:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{precision:>9} {chunk or 'whole':>6} {r['base_mib']:>9.0f} {r['peak_mib']:>9.0f} "
                f"{r['peak_mib'] - r['base_mib']:>9.0f} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['loss']:>9.5f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
