"""The environment editor's "try it", on the worker: load the model (or a run's checkpoint), run
a few episodes of the environment through the same multi-turn rollout code as training
(`trainers.rollout.generate.run_episodes`, transformers engine), and return them as plain dicts.

Tools and user code run in the trainer's sandbox here, never in the web process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRY_SEED = 0  # the same episodes for the same model and rows, so a second try compares with the first


def try_episodes(config: dict[str, Any], model: dict[str, Any], rows: list[dict[str, Any]], n: int,
                 progress: Callable[[str], None] = lambda stage: None) -> dict[str, Any]:  # fmt: skip
    """{"episodes": [[episode]]}: for each row, `n` episodes, each {messages, turns: [Turn.to_dict()],
    end_reason, error, final_text}. A bad config, model or row raises ValueError with the reason."""
    from trainers.data.prompts import render_prompt
    from trainers.models.loading import default_device, load_policy
    from trainers.rollout.engines.base import SamplingParams
    from trainers.rollout.engines.hf import HFEngine
    from trainers.rollout.generate import run_episodes
    from trainers.run.seeding import seed_everything
    from trainers.spec import DataSpec, EnvironmentSpec, ModelSpec

    environment = EnvironmentSpec.model_validate(config)
    progress("loading the model")
    seed_everything(TRY_SEED)
    policy, tokenizer = load_policy(ModelSpec(path=model["model_path"]), default_device(),
                                    checkpoint=model.get("checkpoint"))  # fmt: skip
    policy.eval()
    data = DataSpec(path="try-it")  # only its rendering options are read: the chat template, no system prompt
    prompts = [render_prompt(prompt_row(i, row), tokenizer, data) for i, row in enumerate(rows)]
    params = SamplingParams(max_new_tokens=environment.max_turn_tokens, temperature=1.0)
    engine = HFEngine(model=policy, tokenizer=tokenizer)
    progress("running episodes")
    try:
        groups = run_episodes(engine, tokenizer, prompts, n, params, environment)
    finally:
        engine.close()
    return {"episodes": [[episode_dict(e) for e in group] for group in groups]}


def prompt_row(index: int, row: dict[str, Any]):
    """A try-it row ({prompt or messages, answer?, ...}) as the dataset reader would map it."""
    from trainers.data.rows import PromptRow

    prompt = row.get("messages") or row.get("prompt")
    fields = {k: v for k, v in row.items() if k not in ("prompt", "messages")}
    return PromptRow(id=f"try-{index}", row=index + 1, prompt=prompt, fields=fields)


def episode_dict(episode) -> dict[str, Any]:
    return {
        "messages": episode.messages,
        "turns": [turn.to_dict() for turn in episode.turns],
        "end_reason": episode.end_reason,
        "error": episode.error,
        "final_text": episode.final_text,
    }
