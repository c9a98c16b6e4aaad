"""Where does turn-level credit pay? Trajectory-level GRPO against the turn-level estimators on tasks
where credit assignment should matter, with paired seeds.

Tasks (procedural environments, `trainers/rollout/environments/kinds/procedural.py`):
- `lookup`: the code is behind `--lookup-difficulty` boxes opened in a chain (longer chains: more turns
  before the answer, each one a place to go wrong);
- `guess`: `guess_number` at `--guess-difficulty` (the number in 1..10 * 2^(d-1)), `--guess-turns` turns;
- `doors`: the first turn picks one of `--doors-difficulty + 1` doors and decides the outcome; the second
  turn copies the code shown, which looks the same behind every door (only the lamp's door shows the real one).

Methods (`--methods`): grpo; grpo_progress (GRPO on outcome + the environment's turn reward);
mt_grpo (with the turn reward: without one it is GRPO); gigpo (this project's default modes: one value
per episode, mean/std); gigpo_ref (verl-agent's `gigpo` preset modes: step-row statistics, mean_norm,
gamma 0.95); igpo (IGPO's advantage with its information-gain turn rewards, log-probability gains,
gains and outcomes normalised apart).

Model: `--model tiny` (the 1 M-parameter agent model, warmed up per task on scripted transcripts played
through the real environment: some right, some wrong, as `trainers/demos/agent_demo.py` does for lookup)
or a folder (`var/demo/smollm2-135m-instruct`: no warm-up, the environments' instructions on).

Every method trains from the same warm model with the same seeds (seed s: the same prompt order and
initial sampler state for every method), and is scored on the same held-out episodes (rows carrying a
`seed`, so each replays exactly): success = the rubric's exact match of the answer, turn rewards left
out. Prints per method mean +- std over seeds, and per seed the paired difference to GRPO, with its
mean +- std and how many seeds it was above 0, for the success and for the task's diagnostic ("detail":
doors: the first turn opened the lamp's door; lookup: every box of the chain opened; guess: turns taken). Exit 0 when every run finished, 1 otherwise (the
numbers are the result; there is no margin to clear).

    python bench/credit_assignment.py --tasks doors --seeds 0 1 --steps 20      # a small run
    python bench/credit_assignment.py                                          # defaults: all tasks, 3 seeds
    python bench/credit_assignment.py --model var/demo/smollm2-135m-instruct --tasks doors --steps 10
"""

from __future__ import annotations

import argparse
import math
import random
import string
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean, stdev
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainers.demos.agent_demo import HELD_OUT_BOXES, MALFORMED_CALLS, TRAIN_BOXES, build_agent_model  # noqa: E402
from trainers.demos.demo import write_rows  # noqa: E402
from trainers.episodes import Message  # noqa: E402
from trainers.models.quiet import quiet_transformers  # noqa: E402
from trainers.report import MemoryReporter, Rollout  # noqa: E402
from trainers.rollout.environments.base import EpisodeLimits  # noqa: E402
from trainers.rollout.environments.kinds import ENVIRONMENTS  # noqa: E402
from trainers.rollout.environments.kinds.procedural import lookup_call  # noqa: E402
from trainers.run.evaluate import evaluate  # noqa: E402
from trainers.run.loop import train  # noqa: E402
from trainers.run.sft import warm_start  # noqa: E402
from trainers.spec import RunSpec  # noqa: E402

# Method -> (algorithm settings, whether the environment's turn (progress) reward is on).
METHODS: dict[str, tuple[dict[str, Any], bool]] = {
    "grpo": ({"advantage_estimator": "grpo"}, False),
    "grpo_progress": ({"advantage_estimator": "grpo"}, True),
    "mt_grpo": ({"advantage_estimator": "mt_grpo"}, True),
    "gigpo": ({"advantage_estimator": "gigpo"}, False),
    "gigpo_ref": (
        {"advantage_estimator": "gigpo", "gigpo_episode_stats": "step", "gigpo_norm": "mean", "gamma": 0.95},
        False,
    ),
    "igpo": (
        {"advantage_estimator": "igpo", "info_gain_weight": 1.0, "info_gain_type": "log_prob", "igpo_norm": "separate"},
        False,
    ),
}


# ------------------------------------------------------------------ tasks


@dataclass
class Task:
    name: str
    kind: str
    params: dict[str, Any]
    progress_param: str  # the params key of the environment's turn reward
    max_turns: int
    extra_fields: list[str] = field(default_factory=list)

    def environment(self, progress: float, instructions: bool) -> dict[str, Any]:
        params = {**self.params, self.progress_param: progress}
        if self.kind != "guess_number":
            params["instructions"] = instructions
        return {
            "kind": self.kind,
            "params": params,
            "max_turns": self.max_turns,
            "max_episode_tokens": 48 * self.max_turns,
            "max_turn_tokens": 32,
        }

    def make(self) -> Any:
        return ENVIRONMENTS.get(self.kind).create({**self.params}, EpisodeLimits(max_turns=self.max_turns))


def make_tasks(args: argparse.Namespace) -> dict[str, Task]:
    guess_high = 10 * 2 ** (args.guess_difficulty - 1)
    return {
        "lookup": Task("lookup", "lookup", {"difficulty": args.lookup_difficulty, "code_digits": 2},
                       "progress_reward", args.lookup_difficulty + 2, ["box"]),
        "guess": Task("guess", "guess_number", {"difficulty": args.guess_difficulty}, "closeness_reward",
                      args.guess_turns or math.ceil(math.log2(guess_high)) + 1),
        "doors": Task("doors", "doors", {"difficulty": args.doors_difficulty, "code_digits": 2},
                      "progress_reward", 3),
    }  # fmt: skip


def rows(task: Task, n: int, held_out: bool, seed: int) -> list[dict[str, Any]]:
    """Training rows (no seed: each episode draws its own) or held-out rows (a seed each: replayed exactly)."""
    rng = random.Random(f"{task.name}|{held_out}|{seed}")
    boxes = HELD_OUT_BOXES if held_out else TRAIN_BOXES
    out = []
    for i in range(n):
        row: dict[str, Any] = {"id": f"{task.name}-{'held' if held_out else 'train'}-{i}", "prompt": task.name}
        if task.kind == "lookup":
            row["box"] = boxes[i % len(boxes)]
        if held_out:
            row["seed"] = rng.randrange(2**62)
        out.append(row)
    return out


# ------------------------------------------------------------------ warm-up transcripts


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def transcript(task: Task, rng: random.Random) -> list[Message]:
    """One conversation played through the real environment by a scripted, partly wrong policy."""
    env = task.make()
    row: dict[str, Any] = {"seed": rng.randrange(2**62)}
    if task.kind == "lookup":
        row["box"] = rng.choice(TRAIN_BOXES)
        row["difficulty"] = rng.randint(1, task.params["difficulty"])  # every chain length up to the task's
    start = env.reset(row)
    messages = [m for m in start.messages if m["role"] != "system"]
    answer = str(start.fields["answer"])

    def say(text: str) -> Any:
        messages.append({"role": "assistant", "content": text})
        result = env.step(text)
        messages.extend(result.observation)
        return result

    if task.kind == "lookup":
        kind = rng.choices(["tool", "guess", "malformed", "partial"], [0.4, 0.25, 0.15, 0.2])[0]
        if kind == "malformed":
            say(rng.choice(MALFORMED_CALLS).format(box=row["box"]))
        box, code = row["box"], None
        opens = {"tool": row["difficulty"], "partial": rng.randint(1, row["difficulty"])}.get(kind, 0)
        for _ in range(opens):
            content = say(lookup_call(box)).observation[0]["content"]
            if content.startswith("look in box"):
                box = content.split('"')[1]
            else:
                code = content
        messages.append({"role": "assistant", "content": code if code is not None else _digits(rng, len(answer))})
    elif task.kind == "guess_number":
        low, high = 1, env.high
        bisect = rng.random() < 0.3
        for _ in range(task.max_turns):
            guess = (low + high) // 2 if bisect else rng.randint(low, high)
            result = say(str(guess))
            if result.done:
                break
            low, high = (guess + 1, high) if result.observation[0]["content"] == "Higher." else (low, guess - 1)
            low, high = min(low, high), max(low, high)
    else:  # doors: 30 % the lamp's door, else any door; then mostly copy what the room shows
        door = start.fields["lamp"] if rng.random() < 0.3 else rng.choice(env.doors)
        shown = say(door).observation[0]["content"].rsplit(" ", 1)[1].rstrip(".")
        messages.append({"role": "assistant", "content": shown if rng.random() < 0.8 else _digits(rng, len(answer))})
    return messages


def warm_model(task: Task, out: Path, steps: int, examples: int) -> Path:
    rng = random.Random(f"warm|{task.name}")
    base = build_agent_model(out / "base", seed=0)
    return warm_start(base, [transcript(task, rng) for _ in range(examples)], out / "warm", steps=steps, lr=3e-3)


# ------------------------------------------------------------------ runs


def spec_for(task: Task, method: str, model: Path, train_data: Path, out: Path, seed: int, args) -> RunSpec:
    algorithm, progress = METHODS[method]
    real = args.model != "tiny"
    config = {
        "name": f"credit-{task.name}-{method}-{seed}",
        "model": {"path": str(model)},
        "data": {"path": str(train_data), "prompt_field": "prompt", "answer_field": None,
                 "extra_fields": task.extra_fields},
        "rubric": {"criteria": [{"name": "answer", "kind": "exact_match", "weight": 1.0,
                                 "params": {"reference_field": "answer"}}], "pass_threshold": 1.0},
        "environment": task.environment(args.progress if progress else 0.0, instructions=real),
        "algorithm": {"group_size": args.group_size, "policy_loss": "ppo_clip", "loss_agg_mode": "token-mean",
                      "kl_beta": 0.0, **algorithm},
        "rollout": {"max_new_tokens": 32, "temperature": 1.0, "generation_batch_size": 64},
        "optim": {"lr": args.lr, "lr_scheduler": "cosine", "prompts_per_step": args.prompts_per_step,
                  "micro_batch_size": 64, "total_steps": args.steps, "warmup_steps": 0, "max_grad_norm": 1.0,
                  "seed": seed},
        "checkpoint": {"output_dir": str(out), "every_n_steps": 0, "keep_last": 1},
        "eval": {"samples_per_prompt": args.eval_samples},
    }  # fmt: skip
    return RunSpec.model_validate(config)


@dataclass
class Score:
    success: float  # held-out share of episodes whose answer was right (the rubric alone)
    detail: float  # the task's diagnostic: doors: first turn opened the lamp's door; lookup: every box opened
    episodes: int


def _detail(task: Task, r: Rollout) -> float:
    reasons = [t["reason"] for t in r.turns or []]
    if task.kind == "doors":
        return float(any("the lamp's door" in x and "not" not in x for x in reasons))
    if task.kind == "lookup":
        opened = sum(int(x.split()[1]) for x in reasons if x.startswith("opened ") and x.split()[1].isdigit())
        return float(opened >= task.params["difficulty"])
    return float(len(r.turns or []))  # guess: turns taken


def held_out(spec: RunSpec, task: Task, data: Path, checkpoint: str | None, args) -> Score:
    spec = spec.model_copy(deep=True)
    spec.data.path = str(data)
    spec.data.extra_fields = [*task.extra_fields, "seed"]
    spec.eval.checkpoint = checkpoint
    spec.environment.params[task.progress_param] = 0.0  # the success criterion alone
    reporter = MemoryReporter()
    evaluate(spec, reporter)
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    success = mean(sum(s.score for s in r.scores.values()) for r in rollouts)
    return Score(success, mean(_detail(task, r) for r in rollouts), len(rollouts))


def _pm(values: list[float]) -> str:
    return f"{mean(values):.3f} +- {stdev(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", nargs="+", default=["lookup", "guess", "doors"], choices=["lookup", "guess", "doors"]
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=6e-4, help="6e-4 suits the tiny model; try 1e-5 for SmolLM2")
    parser.add_argument("--progress", type=float, default=0.2, help="the turn reward of the *_progress / mt_grpo runs")
    parser.add_argument("--eval-rows", type=int, default=32)
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument("--lookup-difficulty", type=int, default=3)
    parser.add_argument("--guess-difficulty", type=int, default=2)
    parser.add_argument("--guess-turns", type=int, default=0, help="0: ceil(log2(range)) + 1")
    parser.add_argument("--doors-difficulty", type=int, default=2)
    parser.add_argument("--model", default="tiny", help="'tiny' or a model folder (no warm-up)")
    parser.add_argument("--warm-steps", type=int, default=300)
    parser.add_argument("--warm-examples", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # a 1 M-parameter model gains nothing from a second thread on shared cores
    tasks = make_tasks(args)
    failed: list[str] = []
    print(f"config: {vars(args)}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, quiet_transformers():
        tmp_path = Path(tmp)
        for name in args.tasks:
            task = tasks[name]
            t0 = time.perf_counter()
            model = warm_model(task, tmp_path / name, args.warm_steps, args.warm_examples) if args.model == "tiny" \
                else Path(args.model)  # fmt: skip
            train_data = write_rows(rows(task, 64, False, 0), tmp_path / name / "train.jsonl")
            eval_data = write_rows(rows(task, args.eval_rows, True, 0), tmp_path / name / "held_out.jsonl")
            base_spec = spec_for(task, "grpo", model, train_data, tmp_path / name / "base", 0, args)
            before = held_out(base_spec, task, eval_data, None, args)
            print(f"\n== {name} ({task.params}, {task.max_turns} turns): start success {before.success:.3f}, "
                  f"detail {before.detail:.3f}, {before.episodes} held-out episodes "
                  f"(warm-up {time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
            scores: dict[str, dict[int, Score]] = {m: {} for m in args.methods}
            for seed in args.seeds:
                for method in args.methods:
                    t1 = time.perf_counter()
                    out = tmp_path / name / f"{method}-{seed}"
                    spec = spec_for(task, method, model, train_data, out, seed, args)
                    result = train(spec, MemoryReporter())
                    if result.status != "succeeded":
                        failed.append(f"{name}/{method}/seed {seed}: {result.status}")
                        continue
                    scores[method][seed] = held_out(spec, task, eval_data, result.checkpoint, args)
                    s = scores[method][seed]
                    print(f"  seed {seed} {method:14s} success {s.success:.3f} detail {s.detail:.3f} "
                          f"({time.perf_counter() - t1:.0f} s)", flush=True)  # fmt: skip
            print(f"-- {name}: held-out success, mean +- std over seeds {args.seeds}; paired difference to grpo")
            base = scores.get("grpo", {})
            for method, by_seed in scores.items():
                if not by_seed:
                    continue
                line = (f"  {method:14s} success {_pm([s.success for s in by_seed.values()])}  "
                        f"detail {_pm([s.detail for s in by_seed.values()])}")  # fmt: skip
                paired = [by_seed[s].success - base[s].success for s in by_seed if s in base]
                if method != "grpo" and paired:
                    line += f"  vs grpo {_pm(paired)} (above 0 in {sum(d > 0 for d in paired)}/{len(paired)})"
                    detail = [by_seed[s].detail - base[s].detail for s in by_seed if s in base]
                    line += f", detail {_pm(detail)} ({sum(d > 0 for d in detail)}/{len(detail)})"
                print(line, flush=True)
    print("every run finished" if not failed else "failed: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
