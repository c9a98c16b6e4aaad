"""Small specs on the tiny model for trainer tests."""

from pathlib import Path
from typing import Any

from trainers.demos.demo import demo_spec, make_demo_dataset
from trainers.spec import RunSpec


def tiny_spec(model_path: Path, tmp_path: Path, **overrides: Any) -> RunSpec:
    """The demo task, cut down to a few fast steps; `overrides` as in `demo_spec`."""
    data = make_demo_dataset(tmp_path / "letters.jsonl")
    base = {
        "optim": {"total_steps": 3, "prompts_per_step": 2, "micro_batch_size": 8},
        "algorithm": {"group_size": 4},
        "rollout": {"max_new_tokens": 6},
    }
    for section, values in overrides.items():
        base[section] = {**base.get(section, {}), **values} if isinstance(values, dict) else values
    return RunSpec.model_validate(demo_spec(model_path, data, tmp_path / "out", **base))


def engine_trainer_gap(model, prompts, groups, pad_id: int, temperature: float = 1.0) -> float:
    """Mean |engine logprob - trainer logprob| per completion token: `groups[i]` are generations
    of `prompts[i]` with their engine logprobs, the trainer's come from `model`'s forward pass."""
    import torch

    from trainers.update.batches import TokenBatch
    from trainers.update.logprobs import batched_logprobs
    from trainers.update.micro_batching import MicroBatching

    flat = [g for group in groups for g in group]
    flat_prompts = [p for p, group in zip(prompts, groups, strict=True) for _ in group]
    device = next(model.parameters()).device
    batch = TokenBatch.build(flat_prompts, [g.token_ids for g in flat], pad_id=pad_id, device=device)
    logp, _ = batched_logprobs(model, batch, micro_batching=MicroBatching(size=64), temperature=temperature)
    engine_logp = torch.zeros_like(logp)
    for i, g in enumerate(flat):
        engine_logp[i, : len(g.logprobs)] = torch.tensor(g.logprobs)
    mask = batch.completion_mask
    return (((engine_logp - logp).abs() * mask).sum() / mask.sum()).item()
