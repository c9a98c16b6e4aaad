"""A stand-in training worker for the run-page browser test (run as a separate process).

Why not the real trainer: the run page must be checked with a long history (hundreds of
steps, thousands of rollouts) and steady live traffic, in seconds, on CPU. The real
trainer and worker are driven by test_new_user_flow.py; this process reports through the
same path a worker does (`studio.runs.events.record`: rows and events persisted in one
transaction, then published to the Redis channel layer), so page, API and websocket are real.

    python tests/browser/synthetic_run.py HISTORY_STEPS TOTAL_STEPS INTERVAL_S [episodes] [prompts] [hints] [validation]

With `episodes` the run is a multi-turn tool run: each rollout is an episode of one to three turns
that calls a calculator (and, in some, a python tool that raises), with the episode/* metrics.
With `prompts` the groups come from a pool of POOL rows of fixed difficulty (some always right,
some never, the rest half the time), the last group of a step repeats its first row ("<id>@2"),
and each step reports its per-prompt statistics and prompts/*_frac as the trainer does
(trainers.curriculum.stats.PromptBook, written through studio.runs.prompt_stats).
With `hints` each step's last group is a hinted retry (curriculum.hints), with the hints/* metrics;
its first sample's hint and completion are longer than the API sends whole.
With `validation` every VALIDATION_EVERY-th step also reports val/ metrics and validation rollouts
(held-out prompts, split "validation"), as trainers/validation.py does.

Prints one JSON line {"run", "session", "username", "password"} once the history is
written, then reports one step every INTERVAL_S seconds until TOTAL_STEPS.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time

import django

django.setup()

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from studio.accounts.models import OWNER, Team  # noqa: E402
from studio.runs import episodes, prompt_stats, prompts  # noqa: E402
from studio.runs.events import record  # noqa: E402
from studio.runs.models import MetricPoint, Rollout, RolloutScore, Run  # noqa: E402
from trainers.curriculum.stats import PromptBook  # noqa: E402

PROMPTS_PER_STEP = 4
GROUP = 8
SECONDS_PER_STEP = 3.7  # the wall time the history pretends each step took
POOL = 12  # rows of the `prompts` mode; row k is always right (k < 3), never (3 <= k < 6), else half the time
VALIDATION_EVERY, VALIDATION_PROMPTS, VALIDATION_K = 2, 3, 4
LONG_HINT = " count on from the first, one at a time;" * 700  # 28,000 characters
LONG_TAIL = " (checked it again)" * 1200  # 22,800 characters


def metrics_at(step: int, total: int, rng: random.Random) -> dict[str, float]:
    """Curves shaped like a GRPO run that learns: reward rises, entropy falls, KL grows."""
    p = 1 / (1 + math.exp(-(step - total * 0.35) / (total * 0.08)))

    def noise(scale: float) -> float:
        return rng.gauss(0, scale)

    correct = min(1.0, max(0.0, 0.08 + 0.7 * p + noise(0.05)))
    fmt = min(1.0, max(0.0, 0.5 + 0.48 * min(1.0, step / (total * 0.2)) + noise(0.03)))
    return {
        "reward/mean": correct + 0.2 * fmt,
        "reward/std": 0.45 - 0.15 * p + noise(0.02),
        "reward/correct/mean": correct,
        "reward/format/mean": fmt,
        "reward/frac_zero_std_groups": 0.6 - 0.4 * p + noise(0.03),
        "actor/kl": 0.02 * p + abs(noise(0.002)),
        "actor/entropy": 1.3 - 0.6 * p + noise(0.03),
        "actor/loss": noise(0.02),
        "actor/clip_frac_low": abs(0.01 + noise(0.004)),
        "actor/clip_frac_high": abs(0.02 + noise(0.006)),
        "actor/grad_norm": abs(1.0 + noise(0.3)) + (3.0 if rng.random() < 0.01 else 0.0),
        "actor/lr": 1e-5 * min(1.0, step / 20),
        "response/length_mean": 38 - 12 * p + noise(1.5),
        "response/length_max": 64 - (10 * p if rng.random() < 0.5 else 0),
        "response/truncated_frac": max(0.0, 0.15 - 0.12 * p + noise(0.02)),
        "advantage/mean": noise(0.01),
        "advantage/std": 0.9 + noise(0.03),
        "advantage/min": -1.8 + noise(0.2),
        "advantage/max": 1.9 + noise(0.2),
        "perf/tokens_per_s": 820 + noise(40),
        "timing/generate_s": 2.1 + noise(0.1),
        "timing/score_s": 0.2 + noise(0.02),
        "timing/train_s": 1.3 + noise(0.05),
    }


def pool_row(step: int, p: int) -> tuple[str, int, int, float]:
    """The `prompts` mode's group p of a step: (group id, a, b, chance of a right answer)."""
    repeat = p == PROMPTS_PER_STEP - 1  # the step's last group draws its first row again
    k = (step * (PROMPTS_PER_STEP - 1) + (0 if repeat else p)) % POOL
    chance = 1.0 if k < 3 else 0.0 if k < 6 else 0.5
    return f"row-{k:02d}" + ("@2" if repeat else ""), 10 + k, 20 + 3 * k, chance


def rollouts_at(run: Run, step: int, rng: random.Random, pool: bool = False) -> list[Rollout]:
    """Groups of completions to 'What is a + b?', some right, some wrong, some truncated."""
    rows = []
    for p in range(PROMPTS_PER_STEP):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        prompt_id = f"add-{(step * PROMPTS_PER_STEP + p) % 500:03d}"
        chance = min(0.9, 0.1 + step / 200)
        if pool:
            prompt_id, a, b, chance = pool_row(step, p)
        [run_prompt] = prompts.upsert(run.pk, [[
            {"role": "system", "content": "Think, then answer inside <answer></answer>."},
            {"role": "user", "content": f"What is {a} + {b}?"},
        ]])  # fmt: skip
        group = []
        for sample in range(GROUP):
            right = rng.random() < chance
            answer = a + b if right else a + b + rng.choice([-10, -1, 1, 2])
            truncated = not pool and rng.random() < 0.08
            if truncated:
                text = f"<think>Count up from {a}, adding {b} one at a time: " + " ".join(str(a + i) for i in range(12))
            else:
                text = f"<think>{a} plus {b}: add the tens, then the ones.</think> <answer>{answer}</answer>"
            correct = float(right and not truncated)
            fmt = 0.0 if truncated else 1.0
            group.append(
                Rollout(
                    run=run,
                    step=step,
                    prompt_id=prompt_id,
                    sample_index=sample,
                    run_prompt=run_prompt,
                    completion=text,
                    preview=text[:200],
                    reward=correct + 0.2 * fmt,
                    num_tokens=len(text) // 3,
                    finish_reason="length" if truncated else "stop",
                    scores={
                        "correct": {"score": correct, "explanation": f"expected {a + b}", "error": None},
                        "format": {
                            "score": fmt,
                            "explanation": "<answer> tag" + ("" if fmt else " missing"),
                            "error": None,
                        },
                    },
                )
            )
        mean = sum(r.reward for r in group) / GROUP
        std = (sum((r.reward - mean) ** 2 for r in group) / GROUP) ** 0.5
        for r in group:
            r.advantage = (r.reward - mean) / (std + 1e-6)
        rows.extend(group)
    return rows


def episode_metrics(rng: random.Random) -> dict[str, float]:
    return {
        "episode/turns_mean": 2 + rng.random(),
        "episode/tool_calls_mean": 1.5 + rng.random(),
        "episode/tool_calls/calculator": 1.2 + rng.random() * 0.2,
        "episode/tool_calls/python": 0.3 + rng.random() * 0.2,
        "episode/tool_error_rate": 0.2 * rng.random(),
        "episode/well_formed_call_rate": 0.8 + 0.2 * rng.random(),
        "episode/answered_frac": 0.7 + 0.3 * rng.random(),
        "episode/observation_tokens_mean": 12 + rng.random(),
        "episode/ended_at_limit_frac": 0.3 * rng.random(),
        "timing/tool_s": 0.4 + 0.1 * rng.random(),
    }


def call(name: str, arguments: dict, result: str = "", error: str | None = None) -> dict:
    return {"name": name, "arguments": arguments, "result": result, "error": error, "seconds": 0.004,
            "truncated": False}  # fmt: skip


def turn(text: str, calls: list[dict], reward: float = 0.0, reason: str = "", answered: bool = False) -> dict:
    observation = [{"role": "tool", "content": c["error"] and f"error: {c['error']}" or c["result"]} for c in calls]
    return {"text": text, "num_tokens": len(text) // 3, "finish_reason": "stop", "tool_calls": calls,
            "observation": observation, "observation_tokens": 6 * len(calls), "reward": reward, "reason": reason,
            "advantage": 0.0, "answered": answered}  # fmt: skip


def as_episode(row: Rollout, a: int, b: int, rng: random.Random) -> Rollout:
    """The rollout as an episode: ask the calculator, sometimes try python (which raises), then answer
    or run out of turns. Turn advantages share out the rollout's, as the trainer's would."""
    shape = rng.choice(["direct", "calc", "calc", "python-error", "limit"])
    ask = turn(f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{a} + {b}"}}}}</tool_call>',
               [call("calculator", {"expression": f"{a} + {b}"}, str(a + b))], 0.1, "well-formed tool call")  # fmt: skip
    oops = turn(f"```python\nprint({a} + {b} / 0)\n```",
                [call("python", {"code": f"print({a} + {b} / 0)"}, error="ZeroDivisionError: division by zero")],
                -0.1, "tool error")  # fmt: skip
    answer = turn(row.completion, [], row.reward, "final answer scored", answered=True)
    turns = {"direct": [answer], "calc": [ask, answer], "python-error": [oops, ask, answer], "limit": [ask, ask, ask]}
    row.turns = turns[shape]
    for t in row.turns:
        t["advantage"] = row.advantage + t["reward"]
    row.end_reason = "turn_limit" if shape == "limit" else "done"
    for field, value in episodes.columns(row.turns, row.end_reason).items():
        setattr(row, field, value)
    return row


def observe(book: PromptBook, step: int, rollouts: list[Rollout]) -> list[dict]:
    """The step's groups into the book, as the trainer's loop does (a right answer passes); the
    statistic of each group drawn, as Reporter.prompt_stats carries them."""
    groups: dict[str, list[bool]] = {}
    for r in rollouts:
        groups.setdefault(r.prompt_id, []).append(r.scores["correct"]["score"] >= 1.0)
    return [book.observe(step, group_id.split("@")[0], passes).event() for group_id, passes in groups.items()]


def as_hinted(row: Rollout) -> Rollout:
    """The rollout as a hinted retry (trainers.curriculum.hints): its group is the prompt's second of
    the step, and its answer began with the start of the reference solution."""
    a, b = (int(n) for n in row.run_prompt.content[-1]["content"][len("What is ") : -1].split(" + "))
    row.prompt_id, row.hinted, row.hint, row.hint_fraction = f"{row.prompt_id}@2", True, f"<think>{a} plus {b}:", 0.5
    if row.sample_index == 0:  # a long reference solution: hint and completion past the API's cap (texts.TEXT_CAP)
        row.hint += LONG_HINT
        row.completion += LONG_TAIL
    return row


def validation_at(run: Run, step: int, rng: random.Random) -> tuple[dict[str, float], list[Rollout]]:
    """val/ metrics and the validation rollouts behind them: k samples of a few held-out sums."""
    rows = []
    for p in range(VALIDATION_PROMPTS):
        a, b = 70 + p, 30 + p
        [run_prompt] = prompts.upsert(run.pk, [f"Held out: what is {a} + {b}?"])
        for sample in range(VALIDATION_K):
            right = rng.random() < min(0.9, 0.1 + step / 200)
            text = f"<answer>{a + b if right else a + b + 1}</answer>"
            score = {"score": float(right), "explanation": f"expected {a + b}", "error": None}
            rows.append(Rollout(run=run, step=step, prompt_id=str(p + 1), sample_index=sample, run_prompt=run_prompt,
                                completion=text, preview=text, reward=float(right), num_tokens=len(text) // 3,
                                scores={"correct": score}, trained=False, split="validation"))  # fmt: skip
    solved = [sum(r.reward for r in rows[p * VALIDATION_K : (p + 1) * VALIDATION_K]) for p in range(VALIDATION_PROMPTS)]
    mean = sum(r.reward for r in rows) / len(rows)
    values = {
        "val/reward/mean": mean,
        "val/reward/std": (sum((r.reward - mean) ** 2 for r in rows) / len(rows)) ** 0.5,
        "val/reward/correct/mean": mean,
        "val/pass@1": sum(c / VALIDATION_K for c in solved) / VALIDATION_PROMPTS,
        "val/pass@4": sum(c > 0 for c in solved) / VALIDATION_PROMPTS,
    }
    return values, rows


def report_step(run: Run, step: int, total: int, rng: random.Random, wall_time: float,
                book: PromptBook | None = None, validation: bool = False) -> None:  # fmt: skip
    values = metrics_at(step, total, rng)
    rollouts = rollouts_at(run, step, rng, pool=book is not None)
    stats = observe(book, step, rollouts) if book is not None else []
    if book is not None:
        values |= book.fractions()
    if validation and step % VALIDATION_EVERY == 0:
        val_values, val_rows = validation_at(run, step, rng)
        values |= val_values
        rollouts += val_rows
    if run.spec.get("environment"):
        values |= episode_metrics(rng)
        for row in rollouts:
            a, b = (int(n) for n in row.run_prompt.content[-1]["content"][len("What is ") : -1].split(" + "))
            as_episode(row, a, b, rng)
    if run.spec.get("curriculum", {}).get("hints"):  # the step's last group is a hinted retry
        values |= {"hints/groups_hinted": 1.0, "hints/hinted_pass_rate": rng.random(), "hints/mean_fraction": 0.5}
        for row in rollouts[-GROUP:]:
            as_hinted(row)
    with transaction.atomic():
        MetricPoint.objects.bulk_create(
            MetricPoint(run=run, step=step, key=k, value=v, wall_time=wall_time) for k, v in values.items()
        )
        rows = Rollout.objects.bulk_create(rollouts)
        RolloutScore.objects.bulk_create(
            RolloutScore(rollout=r, run=run, criterion=name, score=s["score"])
            for r in rows
            for name, s in r.scores.items()
        )
        written = prompt_stats.record(run.pk, step, stats)
        line = f"step {step}/{total} reward {values['reward/mean']:.3f} kl {values['actor/kl']:.4f}"
        record(
            run.pk,
            [
                ("metrics", step, {"values": values}),
                *([prompt_stats.event(step, written)] if written else []),  # as the worker's reporter does
                ("rollouts", step, {"items": [r.summary() for r in rows]}),
                ("log", step, {"line": line}),
            ],
            last_step=step,
        )


def create_run(total: int, with_episodes: bool = False, with_hints: bool = False) -> tuple[Run, str]:
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    team = Team.objects.create(name="Reasoning")
    team.add_member(user, OWNER)
    spec = {
        "name": "grpo-arith",
        "rubric": {"criteria": [{"name": "correct", "kind": "exact_match"}, {"name": "format", "kind": "regex"}]},
        "algorithm": {"preset": "grpo", "kl_beta": 0.04},
    }
    if with_episodes:
        spec["environment"] = {"kind": "tools", "params": {"tools": ["calculator", "python"]}, "max_turns": 3}
    if with_hints:
        spec["curriculum"] = {"hints": True, "hint_field": "answer"}
    run = Run.objects.create(
        team=team,
        name="grpo-arith",
        spec=spec,
        state="running",
        total_steps=total,
        created_by=user,
        started=timezone.now(),
    )
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return run, session.session_key


def main() -> None:
    history, total, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    rng = random.Random(3)
    modes = set(sys.argv[4:])
    run, session = create_run(total, with_episodes="episodes" in modes, with_hints="hints" in modes)
    book = PromptBook([f"row-{k:02d}" for k in range(POOL)]) if "prompts" in modes else None
    validation = "validation" in modes
    start = time.time() - history * SECONDS_PER_STEP
    for step in range(1, history + 1):
        report_step(run, step, total, rng, start + step * SECONDS_PER_STEP, book, validation)
    print(json.dumps({"run": run.pk, "session": session, "username": "alice", "password": "pw-alice-123"}), flush=True)
    for step in range(history + 1, total + 1):
        time.sleep(interval)
        report_step(run, step, total, rng, time.time(), book, validation)
    record(run.pk, [("status", None, {"state": "succeeded", "detail": "finished"})], state="succeeded")


if __name__ == "__main__":
    main()
