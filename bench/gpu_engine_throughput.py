"""Rollout throughput on one GPU: the transformers engine against vLLM (colocated), same
prompts, same sampling, fixed-length completions; plus the cost of one weight sync and of
a sleep/wake cycle. Needs a CUDA GPU and `pip install vllm`; says so and exits otherwise.

    python bench/gpu_engine_throughput.py                       # tiny model built locally
    python bench/gpu_engine_throughput.py --model /shared/models/qwen2.5-0.5b-instruct \\
        --prompts 64 --group-size 8 --max-new-tokens 256 --dtype bfloat16

Prints generated tokens/s for each engine, the vLLM/transformers speed-up, the mean
|logprob| gap between vLLM and a trainer forward pass, and seconds per weight sync.
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


def make_spec(model: str, engine: str, args: argparse.Namespace, work: Path):
    from trainers.spec import RunSpec

    data = work / "prompts.jsonl"
    data.write_text(json.dumps({"prompt": "hi"}) + "\n")
    return RunSpec.model_validate(
        {
            "model": {"path": model, "dtype": args.dtype},
            "data": {"path": str(data), "max_prompt_tokens": 256},
            "rubric": {"criteria": [{"name": "any", "kind": "length", "params": {}}]},
            "algorithm": {"group_size": args.group_size},
            "rollout": {
                "engine": engine,
                "max_new_tokens": args.max_new_tokens,
                "generation_batch_size": args.prompts * args.group_size,
                "vllm_gpu_memory_utilization": args.gpu_memory_utilization,
            },
        }
    )


def timed_generations(engine, prompts, args, params, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        torch_sync()
        t0 = time.perf_counter()
        groups = engine.generate(prompts, args.group_size, params)
        torch_sync()
        times.append(time.perf_counter() - t0)
        lengths = {len(g.token_ids) for group in groups for g in group}
        if lengths != {args.max_new_tokens}:
            print(f"  note: completion lengths {sorted(lengths)[:5]}... (EOS reached)")
    return times


def torch_sync() -> None:
    import torch

    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model folder or hub id (default: trainers.tiny 'small')")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    args = p.parse_args(argv)

    import torch

    from trainers.engines.availability import vllm_available

    if not torch.cuda.is_available() or not vllm_available():
        print("needs a CUDA GPU and vLLM (pip install vllm); skipping", file=sys.stderr)
        return 2

    from transformers import AutoTokenizer

    from trainers.engines.base import SamplingParams, create_engine
    from trainers.engines.mismatch import logprob_gap
    from trainers.logprobs import TokenBatch, batched_logprobs
    from trainers.models import load_policy
    from trainers.tiny import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        work = Path(tmp)
        model = args.model or str(build_tiny_model(work / "model", size="small"))
        tokenizer = AutoTokenizer.from_pretrained(model)
        texts = [f"Question {i}: what is {i} + {2 * i}? Explain step by step." for i in range(args.prompts)]
        prompts = [tokenizer.encode(t) for t in texts]
        total = args.prompts * args.group_size * args.max_new_tokens
        results = {}

        hf_spec = make_spec(model, "transformers", args, work)
        policy, _ = load_policy(hf_spec.model)
        # The transformers engine stops at EOS; an id that never occurs keeps every completion full length.
        hf = create_engine(hf_spec, model=policy, tokenizer=tokenizer)
        hf.eos_ids = [-1]
        params = SamplingParams(max_new_tokens=args.max_new_tokens)
        times = timed_generations(hf, prompts, args, params, args.repeats)
        results["transformers"] = total / statistics.median(times[1:] or times)
        print(f"transformers: {results['transformers']:.0f} tokens/s ({', '.join(f'{t:.2f}' for t in times)} s)")

        vllm_spec = make_spec(model, "vllm", args, work)
        engine = create_engine(vllm_spec, model=policy, tokenizer=tokenizer)
        try:
            t0 = time.perf_counter()
            engine.sync_weights()
            print(f"vLLM first weight sync: {time.perf_counter() - t0:.3f} s")
            vparams = SamplingParams(max_new_tokens=args.max_new_tokens, logprobs=True)
            times = timed_generations(engine, prompts, args, vparams, args.repeats)
            results["vllm"] = total / statistics.median(times[1:] or times)
            print(f"vLLM:         {results['vllm']:.0f} tokens/s ({', '.join(f'{t:.2f}' for t in times)} s)")
            print(f"speed-up:     {results['vllm'] / results['transformers']:.1f}x")

            groups = engine.generate(prompts[:8], args.group_size, vparams)
            flat = [g for group in groups for g in group]
            flat_prompts = [pr for pr, group in zip(prompts[:8], groups, strict=True) for _ in group]
            batch = TokenBatch.build(
                flat_prompts, [g.token_ids for g in flat], pad_id=tokenizer.pad_token_id or 0, device="cuda"
            )
            trainer_logp, _ = batched_logprobs(policy, batch, micro_batch_size=16)
            engine_logp = torch.zeros_like(trainer_logp)
            for i, g in enumerate(flat):
                engine_logp[i, : len(g.logprobs)] = torch.tensor(g.logprobs, device="cuda")
            print(f"logprob gap:  {logprob_gap(engine_logp, trainer_logp, batch.completion_mask)}")

            syncs = []
            for _ in range(3):
                engine.update_weights(policy)
                torch_sync()
                t0 = time.perf_counter()
                engine.sync_weights()  # wakes the weights, loads them in place
                torch_sync()
                syncs.append(time.perf_counter() - t0)
            print(f"weight sync:  {statistics.median(syncs):.3f} s (median of 3, while asleep)")
        finally:
            engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
