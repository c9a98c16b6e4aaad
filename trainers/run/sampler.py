"""Keeping the sampler's weights in step with the policy (`SamplerSync`), and the whole copy it samples
from where the policy itself cannot (`sampling_copy`).

A sharded model cannot generate on one process alone: generation lengths differ between processes, so
their forward counts would, and rank 0 validates alone. An engine that samples from the model object it
is given (transformers), and IGPO's information-gain passes (each process's own episodes), get a whole
frozen copy instead, refreshed from the gathered shards after each update; vLLM holds its own copy
already. Asynchronous rollouts sample from weights of their own too, which the trainer refreshes between
the generator's requests while it trains on the policy: the transformers engine then gets a whole copy."""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import DeviceMesh

from trainers.models.loading import Reference
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.engines.catalog import engine_class
from trainers.rollout.engines.vllm_weights import export_weights
from trainers.scale.sharding import copy_weights_into, full_copy, shard_model
from trainers.spec import RunSpec


def sampling_copy(
    spec: RunSpec, model: torch.nn.Module, reference: Reference | None, mesh: DeviceMesh | None
) -> torch.nn.Module | None:
    """The whole copy to sample from, taken before sharding, when something needs one (else None); shards
    the policy and the reference on `mesh` when there is one.

    The reference is sharded like the policy: it is as large as the policy, and holding it whole on every
    process would undo what sharding saves. Its forwards are then collective too, and follow the same rule
    as the policy's (trainers.update.lockstep). A LoRA run's reference is the policy itself with its
    adapters off: sharded with it."""
    samples_from_model = engine_class(spec.rollout.engine).samples_from_model
    if mesh is None:
        return full_copy(model) if spec.rollout.asynchronous.runs_ahead and samples_from_model else None
    whole = full_copy(model) if samples_from_model or spec.algorithm.info_gain_weight > 0 else None
    shard_model(model, mesh, spec.parallel)
    if reference is not None and reference.model is not model:
        shard_model(reference.model, mesh, spec.parallel)
    return whole


class SamplerSync:
    def __init__(self, model: torch.nn.Module, copy: torch.nn.Module | None, *, asynchronous: bool) -> None:
        self.model = model
        self.copy = copy
        self.asynchronous = asynchronous

    @property
    def sampling_model(self) -> torch.nn.Module:
        """The model generation and IGPO run on: the policy, or its whole copy."""
        return self.copy if self.copy is not None else self.model

    def sync(self, engine: RolloutEngine) -> None:
        """Make `engine` sample from the policy's current weights. Sharded, the weights are gathered one
        tensor at a time into the whole copy or straight into vLLM: every process at once. Asynchronous, they
        go into vLLM now rather than at its next request: by then the trainer is changing them."""
        if self.copy is not None:
            copy_weights_into(self.copy, export_weights(self.model))
        engine.update_weights(self.sampling_model)
        if self.asynchronous:
            engine.sync_weights()


def sampling_params(spec: RunSpec) -> SamplingParams:
    """The run's sampling settings. Engine logprobs only matter where the sampler is not the trainer (vLLM,
    or the asynchronous pipeline's copy, whose weights are older): to measure the gap and, with an
    off-policy correction, correct for it. Synchronous, the transformers engine samples from the policy
    itself."""
    separate_sampler = spec.rollout.engine != "transformers" or spec.rollout.asynchronous.runs_ahead
    return SamplingParams.from_spec(spec, logprobs=separate_sampler or spec.algorithm.off_policy is not None)
