"""The parallel settings in a single process (several processes: tests/trainers/test_distributed.py)."""

import pytest
import torch

from trainers.report import MemoryReporter
from trainers.run.loop import Trainer
from trainers.scale.sharding import ParallelError
from trainers.update.batches import TokenBatch

from ..helpers import tiny_spec

PROMPTS = [[1, 5, 6], [1, 7], [1, 5, 6]]
COMPLETIONS = [[7, 8, 9], [10, 11, 12, 13, 14], [15]]
ADVANTAGES = [1.0, -0.5, 2.0]


def step_gradient(trainer: Trainer) -> dict[str, torch.Tensor]:
    """The gradient one optimisation pass on a fixed batch steps with."""
    captured: dict[str, torch.Tensor] = {}
    trainer.optimizer.step = lambda: captured.update(
        {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    )
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=trainer.lockstep.pad_id, device=trainer.device)
    mask = batch.completion_mask
    advantages = torch.tensor(ADVANTAGES, device=trainer.device)[:, None] * mask
    trainer.update.optimise(batch, mask, advantages, None, None, None)
    return captured


def test_activation_checkpointing_gives_the_same_gradient(tiny_model_path, tmp_path):
    optim = {"micro_batch_size": 2, "max_grad_norm": None}
    plain = Trainer(tiny_spec(tiny_model_path, tmp_path, optim=optim), MemoryReporter())
    checkpointed = Trainer(
        tiny_spec(tiny_model_path, tmp_path, optim=optim, parallel={"activation_checkpointing": True}),
        MemoryReporter(),
    )
    assert checkpointed.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    expected, got = step_gradient(plain), step_gradient(checkpointed)
    assert got.keys() == expected.keys() and expected
    for name, grad in got.items():
        torch.testing.assert_close(grad, expected[name], atol=1e-6, rtol=1e-5, msg=name)
    plain.close()
    checkpointed.close()


def test_bf16_mixed_precision_alone_is_autocast(tiny_model_path, tmp_path):
    """A single process is not sharded: parallel.mixed_precision bf16 computes under autocast
    (bf16 matmuls, float32 weights), as optim.precision bfloat16 does."""
    trainer = Trainer(tiny_spec(tiny_model_path, tmp_path, parallel={"mixed_precision": "bf16"}), MemoryReporter())
    assert trainer.lockstep.precision == "bfloat16" and trainer.mesh is None
    assert next(trainer.model.parameters()).dtype == torch.float32
    trainer.close()


def test_a_spec_asking_for_several_processes_is_refused_before_the_model_loads(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, parallel={"procs_per_node": 2})
    with pytest.raises(ParallelError, match="single process"):
        Trainer(spec, MemoryReporter())


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_cpu_offload_is_refused_at_start_on_a_machine_without_a_gpu(tiny_model_path, tmp_path):
    spec = tiny_spec(tiny_model_path, tmp_path, parallel={"cpu_offload": True})
    with pytest.raises(ParallelError, match="no CUDA GPU"):
        Trainer(spec, MemoryReporter())
