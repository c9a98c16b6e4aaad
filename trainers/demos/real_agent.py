"""The real-model agent demo: SmolLM2-135M-Instruct (`trainers.models.pretrained`) answers arithmetic it
cannot do in its head by calling the calculator tool, through its own ChatML template with
Hermes-style calls (`<tool_call>{"name": "calculator", "arguments": {"expression": ...}}</tool_call>`).

Task: "What is 347 + 589?" or "What is 23 * 47?" -> "936" / "1081". The `tools` environment offers
the calculator; its system message lists the tool's JSON schema the way Qwen's template does. A
turn with a call gets the calculator's result as a `tool` message; a turn without one is the
answer, scored by the rubric: `correct` (the last number of the answer is the result,
math-verified) and `used_calculator` (a calculator call came back with a number). A tenth of the
rows are held out for the `val/` curves.

Out of the box the model never calls the tool and rarely gets these right, so
`warm_real_agent_model` gives it a short cold start (ReTool's cold-start SFT) on transcripts played
through the real environment: most call the calculator and answer with its result, some answer at
once with a near miss (`WARM_UP_MIX`, as `agent_demo` mixes guesses in), which leaves RL a model
that calls the tool on most episodes, not all. Measured on 32 held-out problems, on a CPU (2 cores
shared with other work):

| model | calls (T=1, 4 each) | right (T=1) | calls (greedy) | right (greedy) |
|---|---|---|---|---|
| packaged model | 0 / 128 | 0 / 128 | 0 / 32 | 1 / 32 |
| after the cold start (8 steps of 8, 28 s) | 113 / 128 | 109 / 128 | 32 / 32 | 32 / 32 |
| then 5 GRPO steps (4 prompts x 8, lr 1e-5, 17 min) | 123 / 128 | 120 / 128 | 32 / 32 | 32 / 32 |

(The GRPO run's own validation, 16 held-out prompts: 0.81 before, 0.94 after step 5.)

The studio's agent demo (`real_agent_demo_spec`, made on the first start by studio.bootstrap) runs the
same cold start as the run's first part, its `warm_up` section (trainers.run.sft.warmed) on the
conversations `make_warm_up_file` writes. Measured on the 2-core CPU shared with other work: 14 of 16
episodes of the step-0 validation called the calculator (13 right), 25 of 32 of step 1 (24 right).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from trainers.demos.demo import with_overrides, write_rows
from trainers.episodes import Message
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.kinds.tools import ToolsEnvironment
from trainers.rollout.environments.system_prompt import suggested_system_prompt
from trainers.run.sft import cold_start
from trainers.spec import EnvironmentSpec

DATASET_NAME = "Calculator arithmetic"
DATASET_DESCRIPTION = (
    "Generated sums of two 3-digit numbers and products of a 2-digit and a 2- or 3-digit number, "
    "answered with the number: 'What is 347 + 589?' -> 936."
)
RUBRIC_NAME = "Right number, by the calculator"
RUBRIC_DESCRIPTION = (
    "The last number of the final answer is the result (0.8), and the episode made a well-formed "
    "calculator call that returned a number (0.2)."
)
ENVIRONMENT_NAME = "Calculator (Hermes tool calls)"
ENVIRONMENT_DESCRIPTION = (
    "The tools environment with the calculator tool: the system message lists its JSON schema, the model "
    'calls it as <tool_call>{"name": "calculator", "arguments": {"expression": ...}}</tool_call> and reads '
    "the result in a tool message; a turn without a call is the answer."
)
EXPERIMENT_NAME = "Demo: SmolLM2-135M-Instruct uses a calculator"
EXPERIMENT_DESCRIPTION = (
    "An agent you can watch: a real pretrained model (135 M parameters) with the calculator tool. Each run "
    "begins with a short supervised cold start on calculator transcripts (warm_up: 8 steps, about half a "
    "minute on a CPU), then GRPO; from the step-0 validation on, the rollout inspector shows its tool calls, "
    "the calculator's results and its answers (most episodes call the tool)."
)

PROMPTS = {"+": "What is {a} + {b}?", "*": "What is {a} * {b}?"}
TOOL = "calculator"
# The prompt the studio's environment editor suggests for the calculator (the same words, one source).
SYSTEM_PROMPT = suggested_system_prompt([{"kind": TOOL}])
FINAL = "{result}"  # the final answer the cold start teaches: the calculator's result alone
# What the cold-start transcripts do, in shares: call the calculator and answer with its result /
# answer at once with a near miss. RL starts from a model that calls the tool on most episodes, not all.
WARM_UP_MIX = {"tool": 0.7, "guess": 0.3}


def problem(rng: random.Random) -> tuple[str, int, int]:
    """(operator, a, b): half sums of two 3-digit numbers, half products of a 2-digit number and a
    2- or 3-digit one (answers of 3 to 5 digits)."""
    if rng.random() < 0.5:
        return "+", rng.randint(100, 999), rng.randint(100, 999)
    return "*", rng.randint(11, 99), rng.randint(11, 999)


def real_agent_rows(count: int = 400, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        op, a, b = problem(rng)
        rows.append(
            {
                "id": f"calc-{i}",
                "prompt": PROMPTS[op].format(a=a, b=b),
                "answer": str(a + b if op == "+" else a * b),
                "expression": f"{a} {op} {b}",
            }
        )
    return rows


def make_real_agent_dataset(path: str | Path, count: int = 400, seed: int = 0) -> Path:
    """Write the demo's rows (id, prompt, answer, expression) as JSONL and return the path."""
    return write_rows(real_agent_rows(count, seed), path)


# Run in the rubric sandbox on the episode's transcript: 1 when some calculator call came back with
# a number (the tool's error messages start with "error:").
USED_CALCULATOR_CODE = """\
def score(prompt, completion, transcript=None, **fields):
    for message in transcript or []:
        if message.get("role") == "tool" and message.get("name") == "calculator":
            text = str(message.get("content", "")).strip()
            if text and not text.startswith("error"):
                return 1.0, "the calculator returned " + text[:40]
    return 0.0, "no calculator call returned a number"
"""


def real_agent_rubric() -> dict[str, Any]:
    return {
        "criteria": [
            {"name": "correct", "kind": "math_equiv", "weight": 0.8, "params": {"extract": "last_number"}},
            {"name": "used_calculator", "kind": "python", "weight": 0.2, "params": {"code": USED_CALCULATOR_CODE}},
        ],
        "pass_threshold": 0.8,
    }


def real_agent_environment() -> dict[str, Any]:
    """The `tools` environment with the calculator, as a RunSpec section: Hermes calls, the default
    (Qwen) tools prompt listing the calculator's schema after `SYSTEM_PROMPT`."""
    return {
        "kind": "tools",
        "params": {"tools": [{"kind": TOOL}], "formats": ["hermes"], "system_prompt": SYSTEM_PROMPT},
        "max_turns": 3,
        "max_episode_tokens": 160,
        "max_turn_tokens": 48,
        "max_observation_chars": 200,
    }


def real_agent_spec(
    model_path: str | Path, data_path: str | Path, output_dir: str | Path, **overrides: Any
) -> dict[str, Any]:
    """A RunSpec config (dict) for the demo; `overrides` replace a top-level section's keys."""
    spec: dict[str, Any] = {
        "name": "calculator-agent",
        "model": {"path": str(model_path), "dtype": "float32"},
        "data": {
            "path": str(data_path),
            "prompt_field": "prompt",
            "answer_field": "answer",
            "max_prompt_tokens": 384,
        },
        "rubric": real_agent_rubric(),
        "environment": real_agent_environment(),
        "algorithm": {"preset": "grpo", "group_size": 8, "loss_agg_mode": "token-mean", "kl_beta": 0.0},
        "rollout": {"max_new_tokens": 48, "temperature": 1.0, "generation_batch_size": 64},
        "optim": {
            "lr": 1e-5,
            "prompts_per_step": 4,
            "micro_batch_size": 16,
            "total_steps": 20,
            "warmup_steps": 0,
            "max_grad_norm": 1.0,
            "seed": 0,
        },
        "validation": {"holdout_fraction": 0.1, "every_n_steps": 5, "num_prompts": 16, "samples_per_prompt": 1},
        "checkpoint": {"output_dir": str(output_dir), "every_n_steps": 0, "keep_last": 1},
        "eval": {"samples_per_prompt": 4},
    }
    return with_overrides(spec, overrides)


def calculator_call(expression: str) -> str:
    """The Hermes call the cold start teaches, as the template's tool prompt shows it."""
    return "<tool_call>\n" + json.dumps({"name": TOOL, "arguments": {"expression": expression}}) + "\n</tool_call>"


def guess(answer: str, rng: random.Random) -> str:
    """A near miss, as a model answering in its head writes one: one digit of `answer` changed."""
    at = rng.randrange(len(answer))
    digits = [d for d in "0123456789" if d != answer[at] and not (at == 0 and d == "0")]
    return answer[:at] + rng.choice(digits) + answer[at + 1 :]


def warm_up_transcripts(
    rows: list[dict[str, str]], mix: dict[str, float] = WARM_UP_MIX, seed: int = 0
) -> list[list[Message]]:
    """One conversation per row, played through the real environment (its system message, the
    calculator's real result), each kind in its `mix` share: `tool` calls the calculator, reads the
    result and answers with it; `guess` answers at once with a near miss."""
    spec = EnvironmentSpec.model_validate(real_agent_environment())
    rng = random.Random(seed)
    kinds = rng.choices(list(mix), weights=list(mix.values()), k=len(rows))
    out = []
    for row, kind in zip(rows, kinds, strict=True):
        env = ToolsEnvironment.create(spec.params, EpisodeLimits.of(spec))
        try:
            start = env.reset({"messages": [{"role": "user", "content": row["prompt"]}]})
            if kind == "guess":
                out.append([*start.messages, {"role": "assistant", "content": guess(row["answer"], rng)}])
                continue
            call = calculator_call(row["expression"])
            result = env.step(call)
        finally:
            env.close()
        (tool,) = result.observation
        out.append(
            [
                *start.messages,
                {"role": "assistant", "content": call},
                tool,
                {"role": "assistant", "content": FINAL.format(result=tool["content"])},
            ]
        )
    return out


# ------------------------------------------------------------------ the cold start

WARM_MARKER = "real-agent-warm.json"  # written last: a folder without it is an interrupted warm-up
WARM_EXAMPLES = 300  # transcripts, each a new problem (seeded apart from the dataset's)
WARM_STEPS = 8
WARM_BATCH = 8
WARM_LR = 1e-4


def warm_real_agent_model(
    model_path: str | Path,
    out_dir: str | Path,
    seed: int = 0,
    *,
    steps: int = WARM_STEPS,
    examples: int = WARM_EXAMPLES,
    batch_size: int = WARM_BATCH,
    lr: float = WARM_LR,
    mix: dict[str, float] = WARM_UP_MIX,
    device: str | None = None,
) -> Path:
    """The cold start: `model_path` fine-tuned on `examples` calculator transcripts
    (`warm_up_transcripts`, in the shares of `mix`) for `steps` AdamW steps of `batch_size`, on
    `device` (default: the GPU if there is one); written to `out_dir` and returned. Returns at once
    when `out_dir` already holds a finished warm-up (its `WARM_MARKER`)."""
    out = Path(out_dir)
    if (out / WARM_MARKER).is_file():
        return out
    rows = real_agent_rows(examples, seed=10_000 + seed)  # not the dataset's problems (seed 0)
    transcripts = warm_up_transcripts(rows, mix, seed=seed)
    return cold_start(model_path, transcripts, out, steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                      device=device, marker=WARM_MARKER, about={"mix": mix})  # fmt: skip


# ------------------------------------------------------------------ the studio's agent demo


def make_warm_up_file(path: str | Path, examples: int = WARM_EXAMPLES, seed: int = 0,
                      mix: dict[str, float] = WARM_UP_MIX) -> Path:  # fmt: skip
    """The cold start's conversations (`warm_up_transcripts` of problems apart from the dataset's) as JSONL
    rows {"messages": [...]}, the file a run's `warm_up.path` names; returns the path. No torch."""
    rows = real_agent_rows(examples, seed=10_000 + seed)
    return write_rows(({"messages": messages} for messages in warm_up_transcripts(rows, mix, seed=seed)), path)


# Sampling where vLLM is installed: vLLM, in bfloat16 where the device computes it natively (auto) while
# training stays float32, the difference corrected by truncated importance sampling; without graph
# compilation, which costs minutes of a CPU run's start (bench/agent_demo_speed.py, beside the transformers
# engine: on a 2-core AVX2 CPU the engine starts in 4 s instead of 152-218 s, and a step samples in about
# half the transformers engine's time instead of a quarter).
FAST_SAMPLING = {
    "rollout": {"engine": "vllm", "dtype": "auto", "vllm_enforce_eager": True},
    "algorithm": {"correction": "tis"},
}


def real_agent_demo_spec(
    model_path: str | Path, data_path: str | Path, warm_up_path: str | Path, output_dir: str | Path,
    *, fast_sampling: bool = False, **overrides: Any,
) -> dict[str, Any]:  # fmt: skip
    """The studio's agent demo: `real_agent_spec` with the cold start as the run's first part (its
    `warm_up` section: `WARM_STEPS` steps of `WARM_BATCH` on `make_warm_up_file`'s conversations), so a
    launched run calls the calculator from its first step; `fast_sampling` (for where vLLM is installed)
    samples with `FAST_SAMPLING`. `overrides` apply last."""
    warm_up = {"path": str(warm_up_path), "steps": WARM_STEPS, "batch_size": WARM_BATCH, "lr": WARM_LR}
    spec = real_agent_spec(model_path, data_path, output_dir, warm_up=warm_up)
    if fast_sampling:
        spec = with_overrides(spec, FAST_SAMPLING)
    return with_overrides(spec, overrides)
