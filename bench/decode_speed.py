"""Decode speed of the transformers engine's loop (trainers.rollout.engines.decode.lean_decode), by mode:

- `eager`: the cache sized to the batch, attention over the columns filled so far (the CPU's path, and
  CUDA's with rollout.cuda_graphs off);
- `static`: the fixed-shape step (static KV cache over its whole capacity) run eagerly, no bucket padding;
- `graphs`: the fixed-shape step padded to batch-size buckets and replayed as CUDA graphs (CUDA only:
  elsewhere it is skipped, saying why).

    python bench/decode_speed.py                                   # tiny model, built here
    python bench/decode_speed.py --model var/demo/smollm2-135m-instruct --max-new-tokens 64
    python bench/decode_speed.py --modes eager,graphs --json out.json

Prompts x group size completions of exactly --max-new-tokens tokens (no end token: every row runs to the
limit, so each call is that many decode steps on the whole batch), sampled at temperature 1 from the
same seed in every mode. Reports completion tokens/s and ms per decode step (the call's time over its
steps, prefill included, median of --repeats after one warm-up call, which also captures the graphs),
and whether each mode sampled the same tokens as `eager`.
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

QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.", "Name three primary colours.",
             "What is 12 times 7?", "Explain photosynthesis in one sentence.", "Say hello in Spanish.",
             "What is the boiling point of water?", "Give me a synonym for happy."]  # fmt: skip


def measure(args: argparse.Namespace) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.rollout.engines.base import SamplingParams
    from trainers.rollout.engines.decode import GraphsUnavailable, StaticDecoder, lean_decode

    torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    path = args.model
    if path is None:
        from trainers.demos.tiny import build_tiny_model

        path = build_tiny_model(Path(tempfile.mkdtemp(prefix="decode-speed-")), seed=0)
    dtype = getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    prompts = [tokenizer.encode(q) for q in (QUESTIONS * args.prompts)[: args.prompts]]
    counts = [args.group_size] * args.prompts
    rows = sum(counts)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    result: dict = {"model": str(path), "device": str(device), "dtype": args.dtype, "rows": rows,
                    "max_new_tokens": args.max_new_tokens, "threads": args.threads, "modes": {}}  # fmt: skip
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    reference = None
    for mode in args.modes.split(","):
        try:
            static = None
            if mode == "static":
                static = StaticDecoder(model, max_batch=rows, graphs=False)
            elif mode == "graphs":
                static = StaticDecoder(model, max_batch=rows, graphs=True)
            elif mode != "eager":
                raise SystemExit(f"unknown mode {mode!r}: eager, static, graphs")
        except GraphsUnavailable as exc:
            result["modes"][mode] = {"skipped": str(exc)}
            print(f"{mode:7s} skipped: {exc}")
            continue
        times, tokens = [], None
        for i in range(args.repeats + 1):
            torch.manual_seed(0)
            sync()
            start = time.perf_counter()
            out = lean_decode(model, prompts, counts, params, eos_ids=[], pad_id=pad, static=static)
            sync()
            if i:  # the first call warms up (and captures the graphs)
                times.append(time.perf_counter() - start)
            tokens = [d.token_ids for d in out]
        seconds = statistics.median(times)
        generated = sum(len(t) for t in tokens)
        entry = {
            "seconds": round(seconds, 4),
            "tokens_per_s": round(generated / seconds, 1),
            "ms_per_step": round(1000 * seconds / args.max_new_tokens, 2),
            "same_tokens_as_eager": None if reference is None else tokens == reference,
        }
        if static is not None:
            entry["stats"] = dict(static.stats)
        if mode == "eager":
            reference = tokens
        result["modes"][mode] = entry
        print(f"{mode:7s} {entry['tokens_per_s']:9.1f} tok/s  {entry['ms_per_step']:8.2f} ms/step  "
              f"same tokens as eager: {entry['same_tokens_as_eager']}  {entry.get('stats', '')}")  # fmt: skip
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, help="a transformers folder; default: the tiny model, built here")
    p.add_argument("--modes", default="eager,static,graphs")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", help="default: cuda when torch sees it, else cpu")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    result = measure(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
