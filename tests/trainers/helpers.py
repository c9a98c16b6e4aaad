"""Small specs on the tiny model (and the real one) for trainer tests."""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.demos.demo import demo_spec, make_demo_dataset
from trainers.spec import RunSpec

# The most processes a test here starts as one torchrun job.
MOST_PROCESSES = 4


def job_env(**extra: str) -> dict[str, str]:
    """The environment of a test's torchrun job and of the single process it is compared with: this one, on the
    CPU (gloo) where the machine has GPUs but fewer than MOST_PROCESSES, since each process of a job takes a GPU
    of its own (trainers.scale.distributed.init_distributed); what these tests check of sharding holds on either."""
    import torch  # the job's environment only: the specs above need no torch

    env = {**os.environ, **extra}
    if 0 < torch.cuda.device_count() < MOST_PROCESSES:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


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


# The real model's task for tests: "What is 7 + 5?" answered with a number. Rewards vary inside a
# group almost surely (the length term), so every step trains and moves the weights.
REAL_ROWS = [("What is 7 + 5?", "12"), ("What is 9 + 4?", "13"), ("What is 3 + 8?", "11"), ("What is 6 + 6?", "12")]
REAL_RUBRIC = {
    "criteria": [
        {"name": "correct", "kind": "math_equiv", "weight": 0.5, "params": {"extract": "last_number"}},
        {"name": "short", "kind": "length", "weight": 0.5,
         "params": {"unit": "chars", "target_min": 1, "target_max": 4, "slope": 0.02}},
    ]
}  # fmt: skip


def real_spec(model_path: Path, tmp_path: Path, **overrides: Any) -> RunSpec:
    """Two GRPO steps of 2 prompts x 4 completions of up to 16 tokens on the real model (fast enough
    for CI on a CPU); `overrides` as in `demo_spec`."""
    data = tmp_path / "sums.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"prompt": q, "answer": a}) + "\n" for q, a in REAL_ROWS))
    base: dict[str, Any] = {
        "name": "real-sums",
        "model": {"path": str(model_path), "dtype": "float32"},
        "data": {"system_prompt": "Answer with the number only.", "max_prompt_tokens": 64},
        "rubric": REAL_RUBRIC,
        "algorithm": {"group_size": 4},
        "rollout": {"max_new_tokens": 16, "generation_batch_size": 8},
        "optim": {"total_steps": 2, "prompts_per_step": 2, "micro_batch_size": 8, "lr": 1e-5, "seed": 0},
    }
    for section, values in overrides.items():
        base[section] = {**base.get(section, {}), **values} if isinstance(values, dict) else values
    return RunSpec.model_validate(demo_spec(model_path, data, tmp_path / "out", **base))


def save_the_old_way(trainer, final: bool = False):
    """A checkpoint as written before sharded checkpoints: save_pretrained weights, and the optimiser,
    engine and random states inside trainer_state.pt. Takes a Trainer (or what stands for one)."""
    import torch

    from trainers.run.checkpoint import STATE_FILE, checkpoints_root, rng_state

    folder = checkpoints_root(trainer.spec.checkpoint.output_dir) / f"step-{trainer.step_count}"
    folder.mkdir(parents=True)
    trainer.model.save_pretrained(folder)
    trainer.tokenizer.save_pretrained(folder)
    state = {
        "step": trainer.step_count,
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict(),
        "data": trainer.source.state_dict(),
        "curriculum": trainer.curriculum.state_dict(),
        "engine": trainer.engine.state_dict(),
        "rng": rng_state(),
        "hints": None,
    }
    torch.save(state, folder / STATE_FILE)
    return folder


@contextmanager
def kept_gradients() -> Iterator[dict[str, Any]]:
    """Inside the block an optimisation pass (trainers.update.passes) keeps its accumulated gradients in the
    dict yielded ("grads": one tensor per parameter with a gradient, in order) instead of stepping: the
    weights stay, so each pass starts from the same model."""
    from trainers.update import passes  # torch

    kept: dict[str, Any] = {}

    def keep(model, optimizer, max_grad_norm) -> float:
        kept["grads"] = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        optimizer.zero_grad(set_to_none=True)
        return 0.0

    apply_gradients, passes.apply_gradients = passes.apply_gradients, keep
    try:
        yield kept
    finally:
        passes.apply_gradients = apply_gradients


def policy_update(spec: RunSpec, model, tokenizer, *, resumed: bool = False):
    """The policy update over `model` as a run builds it on one process: its reference, optimiser and lockstep
    (`resumed`: the model holds a checkpoint's weights, not the initial ones)."""
    from trainers.models.loading import load_reference
    from trainers.scale.distributed import dist_info
    from trainers.update.lockstep import Lockstep
    from trainers.update.logprobs import chunk_tokens_for
    from trainers.update.micro_batching import MicroBatching
    from trainers.update.optimizer import make_optimizer
    from trainers.update.policy_update import PolicyUpdate

    device = next(model.parameters()).device
    reference = load_reference(spec.model, model, spec.algorithm.kl_beta, policy_is_initial=not resumed)
    lockstep = Lockstep(
        sharded=False, dist=dist_info(), device=device, pad_id=tokenizer.pad_token_id, precision=spec.optim.precision,
        chunk_tokens=chunk_tokens_for(model, spec.optim.logprob_chunk_mib),
        pack_tokens=MicroBatching.of(spec.optim).pack_tokens,
    )  # fmt: skip
    from trainers.update.teachers import Teachers

    return PolicyUpdate(spec, model, reference, make_optimizer(model, spec.optim), dist=lockstep.dist,
                        lockstep=lockstep, teachers=Teachers.from_spec(spec, tokenizer, lockstep))  # fmt: skip


def update_parts(spec: RunSpec):
    """A policy update built alone, as a run builds it, on one process without a trainer: (PolicyUpdate,
    model, tokenizer). For tests of a step's stages that need no engine, rubric or data."""
    import torch  # the parts' own imports need torch

    from trainers.models.loading import default_device, load_policy

    torch.manual_seed(spec.optim.seed)
    model, tokenizer = load_policy(spec.model, default_device())
    return policy_update(spec, model, tokenizer), model, tokenizer


@dataclass
class StepParts:
    """The parts a step is made of, built alone on one process as a run builds them (no Trainer, no
    validation): the policy and its tokenizer, the data source and curriculum, the rubric, the engine,
    hints, the collector (steps 1-3), the optimiser and its schedule and, when asked for, the policy update
    (4-8). It holds what a checkpoint saves of a run (trainers.run.checkpoint.TrainerState), so the
    checkpoint functions take it as they take a Trainer."""

    spec: RunSpec
    model: Any
    tokenizer: Any
    source: Any
    curriculum: Any
    rubric: Any
    engine: Any
    hinter: Any
    collector: Any
    optimizer: Any
    scheduler: Any
    update: Any = None
    step_count: int = 0
    last_checkpoint: str | None = None
    validation_pending: bool = False

    def rollouts(self, groups: list, trained: list, step: int) -> list:
        """`groups` of step `step` as the run reports them (`trained`: the groups it trained on)."""
        from trainers.run.records import step_rollouts
        from trainers.scale.distributed import dist_info

        return step_rollouts(groups, {id(g) for g in trained}, step=step, multi_turn=self.spec.environment is not None,
                             dist=dist_info())  # fmt: skip

    def trained(self, found) -> list:
        """The groups of `found` (trainers.run.collection.Collected) a step trains on, as Trainer.step cuts them:
        the kept ones, up to this process's share of prompts_per_step (dynamic sampling keeps whole rounds)."""
        return found.kept[: self.collector.local_prompts]

    def step(self) -> tuple[Any, dict[str, float]]:
        """One step of the parts, one process, as `Trainer.step` runs them: collect, adapt a procedural task's
        difficulty, off-policy guidance's rows, update on the kept groups (parts built without the update
        collect only; none when nothing was kept), the schedule moves on; returns what was collected and the
        step's metrics, put together by the trainer's own code (trainers.run.step_metrics.the_step_metrics)."""
        import time

        from trainers.run.step_metrics import the_step_metrics
        from trainers.update.guidance import guidance_batch
        from trainers.update.optimizer import advance_schedule

        started = time.perf_counter()
        found = self.collector.collect(self.step_count)
        procedural = self.collector.adapt_difficulty(found.generated)
        train_groups = self.trained(found)
        train_started = time.perf_counter()
        guidance, guidance_metrics = guidance_batch(
            found.generated, self.spec.algorithm, self.tokenizer, self.curriculum.passes,
            pad_id=self.tokenizer.pad_token_id, device=self.collector.device,
        )  # fmt: skip
        update = (
            self.update(train_groups, self.step_count, guidance) if self.update is not None and train_groups else {}
        )
        lr = advance_schedule(self.scheduler)
        self.step_count += 1
        metrics = the_step_metrics(self, found, train_groups, update, lr=lr, started=started,
                                   train_started=train_started, guidance=guidance_metrics, procedural=procedural)  # fmt: skip
        return found, metrics


@contextmanager
def step_parts(spec: RunSpec, *, update: bool = False) -> Iterator[StepParts]:
    """The parts of a step built alone (see StepParts), seeded as a run seeds them, resumed from
    `spec.checkpoint.resume_from` when it is set (as a run resumes); closed on leaving."""
    from trainers.curriculum.hints import Hinter
    from trainers.curriculum.state import Curriculum
    from trainers.models.loading import default_device, load_policy
    from trainers.rewards.rubric import Rubric
    from trainers.rollout.engines.catalog import create_engine
    from trainers.run import checkpoint
    from trainers.run.collection import GroupCollector, training_prompts
    from trainers.run.sampler import sampling_params
    from trainers.run.seeding import seed_everything
    from trainers.scale.distributed import dist_info
    from trainers.update.optimizer import make_optimizer, make_scheduler

    seed_everything(spec.optim.seed)
    resume_dir = checkpoint.resolve_resume(spec.checkpoint) if spec.checkpoint.resume_from else None
    device = default_device()
    model, tokenizer = load_policy(spec.model, device, checkpoint=checkpoint.initial_weights(resume_dir))
    source, _ = training_prompts(spec, tokenizer)
    curriculum, rubric = Curriculum(spec, source), Rubric.from_spec(spec.rubric)
    engine = create_engine(spec, model=model, tokenizer=tokenizer)  # synchronous: it samples from the policy
    hinter = Hinter.from_spec(spec.curriculum, tokenizer) if spec.curriculum.hints else None
    collector = GroupCollector(
        spec, dist=dist_info(), device=device, local_prompts=spec.optim.prompts_per_step, engine=engine,
        tokenizer=tokenizer, rubric=rubric, curriculum=curriculum, source=source, hinter=hinter,
        sampling=sampling_params(spec), sampling_model=model, steps_done=lambda: 0,  # read when asynchronous
    )  # fmt: skip
    policy = policy_update(spec, model, tokenizer, resumed=resume_dir is not None) if update else None
    optimizer = policy.optimise.optimizer if policy is not None else make_optimizer(model, spec.optim)
    parts = StepParts(spec, model, tokenizer, source, curriculum, rubric, engine, hinter, collector, optimizer,
                      make_scheduler(optimizer, spec.optim), policy)  # fmt: skip
    if resume_dir is not None:
        checkpoint.load_trainer_state(parts, resume_dir)
        engine.update_weights(model)  # a sharded checkpoint's weights were loaded into the model just now
    try:
        yield parts
    finally:
        collector.close()
        engine.close()
        rubric.close()


def stepped(spec: RunSpec, reporter, steps: int | None = None, *, update: bool = False, save: bool = False) -> None:
    """The run's steps up to `steps` (spec's total_steps) on its parts (`update`: with the policy update, else
    collection only), each step's metrics and rollouts reported as a run reports them, the tool-silence watch
    included; resumed from spec.checkpoint.resume_from when it is set; `save`: a checkpoint after the last."""
    from trainers.run.checkpoint import save_checkpoint
    from trainers.run.tool_silence import ToolSilence

    silence = ToolSilence(spec)
    with step_parts(spec, update=update) as parts:
        while parts.step_count < (steps or spec.optim.total_steps):
            found, metrics = parts.step()
            silence.observe(parts.step_count, metrics, reporter)
            reporter.metrics(parts.step_count, metrics)
            reporter.rollouts(parts.step_count, parts.rollouts(found.generated, parts.trained(found), parts.step_count))
        if save:
            save_checkpoint(parts)
