"""Rollout engines side by side: the transformers engine against vLLM (colocated, in process), on
this machine's GPU or, with vLLM's CPU build, its CPU. Same model, prompts and sampling.

    python bench/engine_throughput.py                        # tiny and small models built locally
    python bench/engine_throughput.py --sizes small --max-new-tokens 256
    python bench/engine_throughput.py --model /shared/models/qwen2.5-0.5b-instruct --dtype bfloat16

For each model it prints
- generation: generated tokens/s of each engine on `--prompts` x `--group-size` completions of
  exactly `--max-new-tokens` tokens (EOS never ends one: both engines are told to ignore it),
  median of `--repeats` after a warm-up call;
- GRPO step: seconds per step of the real training loop (`trainers.run.loop.train`) with each engine,
  median of `--steps` steps after the first, split into generate and the rest;
- for vLLM: start-up time, one weight sync, and the mean |logprob| gap to the trainer's forward pass.
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


def make_spec(model: str, engine: str, args: argparse.Namespace, work: Path, prompts: list[str]):
    from trainers.spec import RunSpec

    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "answer": "4"}) + "\n" for p in prompts))
    return RunSpec.model_validate(
        {
            "model": {"path": model, "dtype": args.dtype},
            "data": {"path": str(data), "max_prompt_tokens": 64, "prompt_field": "prompt", "answer_field": "answer"},
            "rubric": {"criteria": [{"name": "four", "kind": "contains", "params": {"keywords": ["4"]}}]},
            "algorithm": {"preset": "grpo", "group_size": args.group_size, "kl_beta": 0.0},
            "rollout": {
                "engine": engine,
                "max_new_tokens": args.max_new_tokens,
                "generation_batch_size": args.prompts * args.group_size,
                "vllm_gpu_memory_utilization": args.memory_utilization,
                "vllm_enforce_eager": args.vllm_eager,
            },
            "optim": {
                "lr": 1e-5,
                "prompts_per_step": args.prompts,
                "micro_batch_size": 16,
                "total_steps": args.steps + 1,
                "seed": 0,
            },  # fmt: skip
            "checkpoint": {"output_dir": str(work / f"out-{engine}"), "every_n_steps": 0, "keep_last": 1},
        }
    )


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats + 1):  # the first call warms up (compilation, allocator)
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return times[1:]


def generation_rates(model: str, args, work: Path, prompts_text: list[str]) -> dict[str, float]:
    """tokens/s of each engine, fixed-length completions; vLLM's start, sync and gap on the side."""
    import torch
    from transformers import AutoTokenizer

    from tests.trainers.helpers import engine_trainer_gap
    from trainers.models.loading import load_policy
    from trainers.rollout.engines.base import SamplingParams
    from trainers.rollout.engines.catalog import create_engine

    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [tokenizer.encode(t) for t in prompts_text]
    total = args.prompts * args.group_size * args.max_new_tokens
    hf_spec = make_spec(model, "transformers", args, work, prompts_text)
    policy, _ = load_policy(hf_spec.model)
    rates = {}

    hf = create_engine(hf_spec, model=policy, tokenizer=tokenizer)
    hf.eos_ids = [-1]  # an id that never occurs: every completion runs to max_new_tokens
    params = SamplingParams(max_new_tokens=args.max_new_tokens)
    times = timed(lambda: hf.generate(prompts, args.group_size, params), args.repeats)
    rates["transformers"] = total / statistics.median(times)

    t0 = time.perf_counter()
    engine = create_engine(make_spec(model, "vllm", args, work, prompts_text), model=policy, tokenizer=tokenizer)
    rates["vllm_start_s"] = time.perf_counter() - t0
    try:
        llm = engine.backend.llm
        from vllm import SamplingParams as VLLMParams

        fixed = VLLMParams(n=args.group_size, max_tokens=args.max_new_tokens, ignore_eos=True, seed=0)
        requests = [{"prompt_token_ids": p} for p in prompts]
        engine.sync_weights()
        times = timed(lambda: llm.generate(requests, fixed, use_tqdm=False), args.repeats)
        rates["vllm"] = total / statistics.median(times)
        syncs = []
        for _ in range(3):
            engine.update_weights(policy)
            sync()
            t0 = time.perf_counter()
            engine.sync_weights()
            sync()
            syncs.append(time.perf_counter() - t0)
        rates["vllm_sync_s"] = statistics.median(syncs)
        groups = engine.generate(prompts, args.group_size, SamplingParams(max_new_tokens=32, logprobs=True))
        with torch.no_grad():
            rates["gap"] = engine_trainer_gap(policy, prompts, groups, tokenizer.pad_token_id or 0)
    finally:
        engine.close()
    return rates


def step_times(model: str, engine: str, args, work: Path, prompts_text: list[str]) -> dict[str, float]:
    from trainers.report import MemoryReporter
    from trainers.run.loop import train

    reporter = MemoryReporter()
    result = train(make_spec(model, engine, args, work, prompts_text), reporter)
    assert result.status == "succeeded", result
    series = {k: reporter.series(k)[1:] for k in ("timing/step_s", "timing/generate_s", "response/length_mean")}
    return {k: statistics.median(v) for k, v in series.items() if v}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["tiny", "small"], help="trainers.demos.tiny sizes to build")
    p.add_argument("--model", default=None, help="a model folder or hub id instead of --sizes")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on the CPU")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=4, help="GRPO steps counted (after one warm-up step)")
    p.add_argument("--memory-utilization", type=float, default=0.2, help="vLLM's share of GPU (or host) memory")
    p.add_argument("--vllm-eager", action="store_true", help="vLLM without graph compilation")
    args = p.parse_args(argv)

    import torch

    from trainers.demos.tiny import build_tiny_model
    from trainers.rollout.engines.availability import vllm_build, vllm_unavailable_reason

    reason = vllm_unavailable_reason()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    args.dtype = args.dtype or ("bfloat16" if torch.cuda.is_available() else "float32")
    print(f"{vllm_build()}, torch {torch.__version__}; {device}; {args.dtype}; {args.prompts} prompts x "
          f"{args.group_size} samples x {args.max_new_tokens} tokens; vLLM {'eager' if args.vllm_eager else 'compiled'}")  # fmt: skip
    prompts_text = [f"Question {i}: what is {i} + {2 * i}? Explain step by step." for i in range(args.prompts)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        work = Path(tmp)
        models = {"model": args.model} if args.model else {
            s: str(build_tiny_model(work / s, size=s)) for s in args.sizes}  # fmt: skip
        for name, model in models.items():
            rates = generation_rates(model, args, work, prompts_text)
            steps = {e: step_times(model, e, args, work, prompts_text) for e in ("transformers", "vllm")}
            rows.append((name, rates, steps))
            print(f"\n{name}: generation tokens/s  transformers {rates['transformers']:.0f}  vLLM {rates['vllm']:.0f}  "
                  f"(vLLM / transformers {rates['vllm'] / rates['transformers']:.2f})")  # fmt: skip
            print(f"{name}: vLLM start {rates['vllm_start_s']:.1f} s, weight sync {rates['vllm_sync_s'] * 1e3:.0f} ms, "
                  f"|logprob gap| {rates['gap']:.1e}")  # fmt: skip
            for engine, s in steps.items():
                print(f"{name}: GRPO step with {engine:12s} {s['timing/step_s']:.2f} s "
                      f"(generate {s['timing/generate_s']:.2f} s, mean length {s['response/length_mean']:.1f})")  # fmt: skip
    print(
        "\n| model | tokens/s transformers | tokens/s vLLM | s/step transformers (generate) | s/step vLLM (generate) |"
    )
    print("|---|---|---|---|---|")
    for name, rates, steps in rows:
        t, v = steps["transformers"], steps["vllm"]
        print(f"| {name} | {rates['transformers']:.0f} | {rates['vllm']:.0f} | {t['timing/step_s']:.2f} "
              f"({t['timing/generate_s']:.2f}) | {v['timing/step_s']:.2f} ({v['timing/generate_s']:.2f}) |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
