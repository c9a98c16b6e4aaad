"""Multi-turn episodes whose tool is slow: how much of a rollout step goes to waiting on tools.

64 concurrent episodes (8 prompts x 8) of the tiny model (built locally) over 3 turns, in a
bench-local environment whose every step sleeps 100 ms (a tool's latency: a sandboxed interpreter,
a search request). Each round samples the next turn of every active episode in one engine call,
then steps the environments: concurrently (a thread per episode, as training does) or one after
another (for comparison). Prints, for each mode, the median of `--repeats` rollouts:

- episodes per second and the rollout step's seconds;
- generation seconds, and seconds waiting on environment steps;
- the share of the step spent waiting on tools.

    python bench/agent_episodes.py
    python bench/agent_episodes.py --prompts 8 --group-size 8 --turns 3 --tool-ms 100 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402

from trainers.episodes import ToolCall  # noqa: E402
from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, StepResult  # noqa: E402


class SleepParams(BaseModel):
    turns: int = 3
    tool_s: float = 0.1


class SleepyTool(Environment):
    """Every turn is answered by a tool that takes `tool_s`; done after `turns` turns."""

    params_model = SleepParams
    params: SleepParams

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        self.turn = 0
        return EnvironmentStart(messages=row["messages"])

    def step(self, text: str) -> StepResult:
        started = time.perf_counter()
        time.sleep(self.params.tool_s)
        self.turn += 1
        done = self.turn >= self.params.turns
        call = ToolCall(name="sleep", result="ok", seconds=time.perf_counter() - started)
        return StepResult(
            observation=[] if done else [{"role": "tool", "content": "ok"}], done=done, tool_calls=[call], answered=done
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--tool-ms", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.data.prompts import Prompt, encode_chat
    from trainers.data.rows import PromptRow
    from trainers.demos.tiny import build_tiny_model
    from trainers.rollout.engines.base import SamplingParams
    from trainers.rollout.engines.hf import HFEngine
    from trainers.rollout.generate import run_episodes
    from trainers.spec import EnvironmentSpec

    torch.set_num_threads(args.threads)
    ENVIRONMENTS.register("bench-sleepy-tool")(SleepyTool)
    work = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    path = build_tiny_model(work / "tiny", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    engine = HFEngine(model=AutoModelForCausalLM.from_pretrained(path), tokenizer=tokenizer)
    prompts = [
        Prompt(PromptRow(f"p{i}", i, f"question {i}", {}), f"question {i}",
               encode_chat(tokenizer, [{"role": "user", "content": f"question {i}"}])[1])
        for i in range(args.prompts)
    ]  # fmt: skip
    env = EnvironmentSpec(
        kind="bench-sleepy-tool",
        params={"turns": args.turns, "tool_s": args.tool_ms / 1000},
        max_turns=args.turns,
        max_turn_tokens=args.turn_tokens,
        max_episode_tokens=args.turns * (args.turn_tokens + 16),
    )
    params = SamplingParams(max_new_tokens=args.turn_tokens, temperature=1.0)
    n_episodes = args.prompts * args.group_size
    print(
        f"{n_episodes} episodes ({args.prompts} prompts x {args.group_size}), {args.turns} turns, "
        f"tool {args.tool_ms:g} ms, up to {args.turn_tokens} tokens a turn, tiny model, torch threads {args.threads}"
    )
    run_episodes(engine, tokenizer, prompts[:1], 2, params, env)  # warm-up
    for concurrent in (True, False):
        rows = []
        for repeat in range(args.repeats):
            torch.manual_seed(repeat)
            timings: dict[str, float] = {}
            t0 = time.perf_counter()
            groups = run_episodes(
                engine, tokenizer, prompts, args.group_size, params, env, timings, concurrent_steps=concurrent
            )
            step = time.perf_counter() - t0
            assert all(len(ep.turns) == args.turns for g in groups for ep in g)
            rows.append((step, timings["generate"], timings["tool"]))
        step, gen, tool = (statistics.median(col) for col in zip(*rows, strict=True))
        mode = "concurrent steps " if concurrent else "one after another"
        print(
            f"{mode}: {n_episodes / step:6.1f} episodes/s, step {step:6.2f} s "
            f"(generate {gen:5.2f} s, waiting on tools {tool:6.2f} s = {tool / step:5.1%} of the step; "
            f"tool time if serial: {n_episodes * args.turns * args.tool_ms / 1000:.1f} s)"
        )


if __name__ == "__main__":
    main()
