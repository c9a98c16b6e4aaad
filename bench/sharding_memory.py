"""Memory per process and step time of a run's model over 1, 2 and 4 processes: sharded (FSDP2, our
`parallel.sharding` "full"), replicated through the same mesh ("replicate"), and PyTorch's
DistributedDataParallel (what accelerate / TRL use for data parallelism without sharding) as the peer.

    python bench/sharding_memory.py                     # hidden 1,024, 4 layers, 16k vocabulary (~82 M params)
    python bench/sharding_memory.py --procs 1,2 --hidden 2048
    python bench/sharding_memory.py --procs 2 --modes replicate,ddp --micro-batches 4 --reduce every   # as before

Every case is its own `torchrun --standalone` job on this machine (gloo on a CPU; NCCL where GPUs are).
Each process builds the same randomly initialised Llama, shards or wraps it, and takes `--steps`
AdamW steps (after one warm-up step) on its share of a fixed global batch of `--batch` sequences of
`--tokens` tokens, so every case does the same work per step in total. Per process it prints:

- state: the bytes of parameters + gradients + AdamW's two moments this process holds (for FSDP2 the
  local shards), against what the arithmetic predicts: 16 bytes per parameter in float32, divided by
  the process count when sharded;
- peak: the process's peak resident set (VmHWM), which adds torch itself, activations and buffers;
- step: the median wall-clock seconds of a step.

With `--micro-batches M` a process's share is split into M micro-batches whose gradients accumulate
before the step, as the loop's micro-batches do. `--reduce once` (the default) reduces them as the loop
does (`trainers.scale.sharding.ReduceOnLast`: replicate on the last backward only; DDP under `no_sync()`
but the last); `--reduce every` reduces after every backward, as the loop did before.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("full", "replicate", "ddp")


def peak_mib() -> float:
    """This process's peak resident set (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def local_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def worker(args: argparse.Namespace) -> None:
    """One process of one case (under torchrun): writes its numbers as JSON to args.out/rank<R>.json."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(ROOT))
    from trainers.scale.distributed import dist_info, init_distributed
    from trainers.scale.sharding import ReduceOnLast, build_mesh, run_pass, shard_model
    from trainers.spec import ParallelSpec

    info = init_distributed(dist_info())
    torch.set_num_threads(max(1, args.threads))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 3,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64, num_key_value_heads=args.hidden // 64,
        max_position_embeddings=args.tokens, tie_word_embeddings=False,
    )  # fmt: skip
    model = LlamaForCausalLM(config).train()
    params = sum(p.numel() for p in model.parameters())
    if args.mode == "ddp":
        if info.enabled:
            model = torch.nn.parallel.DistributedDataParallel(model)
        step_model = model
    else:
        parallel = ParallelSpec(procs_per_node=info.world_size, sharding=args.mode)
        mesh = build_mesh(parallel, info)
        if mesh is not None:
            shard_model(model, mesh, parallel)
        step_model = model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gen = torch.Generator().manual_seed(1)
    batch = torch.randint(0, args.vocab, (args.batch, args.tokens), generator=gen)[info.rank :: info.world_size]
    micro = batch.chunk(args.micro_batches)
    once = args.reduce == "once"

    def step() -> None:
        reduction = ReduceOnLast(model, len(micro) if once else 0)
        for i, rows in enumerate(micro):

            def loss(rows=rows):
                return step_model(input_ids=rows, labels=rows).loss / len(micro)

            if args.mode == "ddp":
                last = i == len(micro) - 1
                with contextlib.nullcontext() if last or not once or not info.enabled else model.no_sync():
                    loss().backward()
                continue
            if once:
                reduction.next_pass()
            run_pass(model, loss).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # keep the gradients allocated: they count in the state

    times = []
    for i in range(args.steps + 1):
        started = time.perf_counter()
        step()
        if i:  # the first step allocates the optimiser state
            times.append(time.perf_counter() - started)
    moments = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    result = {
        "mode": args.mode, "world": info.world_size, "rank": info.rank, "params": params,
        "state_bytes": local_bytes(model.parameters()) + local_bytes(grads) + local_bytes(moments),
        "peak_mib": peak_mib(), "step_s": statistics.median(times), "micro_batches": len(micro),
    }  # fmt: skip
    Path(args.out, f"rank{info.rank}.json").write_text(json.dumps(result))
    if info.enabled:
        torch.distributed.destroy_process_group()


def run_case(args: argparse.Namespace, mode: str, procs: int) -> list[dict]:
    out = Path(tempfile.mkdtemp(prefix=f"shard-{mode}-{procs}-"))
    argv = [__file__, "--worker", "--mode", mode, "--out", str(out), "--hidden", str(args.hidden),
            "--layers", str(args.layers), "--vocab", str(args.vocab), "--batch", str(args.batch),
            "--tokens", str(args.tokens), "--steps", str(args.steps),
            "--threads", str(max(1, (os.cpu_count() or 1) // procs)), "--micro-batches", str(args.micro_batches),
            "--reduce", args.reduce]  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}", *argv]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{mode} x{procs} failed")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(procs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="full", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--procs", default="1,2,4", help="process counts to try")
    parser.add_argument("--modes", default=",".join(MODES), help="full, replicate, ddp")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=4, help="sequences per step, over all processes")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--micro-batches", type=int, default=1, help="micro-batches per process per step")
    parser.add_argument("--reduce", choices=("once", "every"), default="once",
                        help="with micro-batches: reduce on the last backward (the loop) or after every one")  # fmt: skip
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    rows = []
    for procs in (int(p) for p in args.procs.split(",")):
        for mode in args.modes.split(","):
            if procs == 1 and mode != "full":
                continue  # one process is never sharded nor wrapped: the same case three times
            ranks = run_case(args, mode, procs)
            params = ranks[0]["params"]
            predicted = 16 * params / (procs if mode == "full" else 1)
            state = max(r["state_bytes"] for r in ranks)
            label = "single" if procs == 1 else mode
            rows.append((label, procs, params, state, predicted, max(r["peak_mib"] for r in ranks),
                         max(r["step_s"] for r in ranks)))  # fmt: skip
            print(f"{label:>9} x{procs}: state {state / 2**20:8.1f} MiB/process (arithmetic {predicted / 2**20:8.1f}), "
                  f"peak RSS {rows[-1][5]:8.1f} MiB, step {rows[-1][6]:.2f} s", flush=True)  # fmt: skip
    print(f"\nmodel: {rows[0][2] / 1e6:.1f} M parameters; float32 + AdamW = 16 bytes/parameter; "
          f"{args.micro_batches} micro-batch(es) per process per step, reduced {args.reduce}")  # fmt: skip
    print("| sharding | processes | state MiB/process | arithmetic | peak RSS MiB | step s |")
    print("|---|---|---|---|---|---|")
    for label, procs, _, state, predicted, peak, step_s in rows:
        print(f"| {label} | {procs} | {state / 2**20:.1f} | {predicted / 2**20:.1f} | {peak:.0f} | {step_s:.2f} |")


if __name__ == "__main__":
    main()
