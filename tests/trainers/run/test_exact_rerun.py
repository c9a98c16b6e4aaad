"""An exact re-run on CPU repeats bit for bit: two runs of the tiny model with the same settings and seed
report identical metrics and rollouts and end with identical parameters (torch.equal, not approximately),
which is what "Run again exactly" (studio.runs.lifecycle.rerun_exactly) promises on the same machine and
packages. A run with another seed differs, so the comparison can fail."""

import torch
from transformers import AutoModelForCausalLM

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.loop import Trainer

STEPS = 3
# Wall-clock readings: the only things a repeat may change.
CLOCK_PREFIXES = ("timing/", "perf/")


def run_once(spec):
    reporter = MemoryReporter()
    trainer = Trainer(spec, reporter)
    try:
        result = trainer.fit(lambda: False)
        weights = {name: tensor.detach().clone() for name, tensor in trainer.model.state_dict().items()}
    finally:
        trainer.close()
    assert result.status == "succeeded" and result.steps == spec.optim.total_steps
    metrics = [(step, {k: v for k, v in values.items() if not k.startswith(CLOCK_PREFIXES)})
               for step, values in reporter.metric_points]  # fmt: skip
    rollouts = [(step, [(r.prompt_id, r.sample_index, r.completion, r.reward, r.advantage, r.num_tokens)
                        for r in batch]) for step, batch in reporter.rollout_batches]  # fmt: skip
    return metrics, rollouts, weights


def test_the_same_seed_repeats_every_metric_rollout_and_parameter_bit_for_bit(tiny_model_path, tmp_path):
    settings = {"optim": {"total_steps": STEPS, "seed": 7, "lr": 1e-3}, "checkpoint": {"save_final": False}}
    first = run_once(tiny_spec(tiny_model_path, tmp_path / "a", **settings))
    again = run_once(tiny_spec(tiny_model_path, tmp_path / "b", **settings))
    assert [step for step, _ in first[0]] == [1, 2, 3]
    assert first[0] == again[0]  # floats compared with ==: bit for bit
    assert first[1] == again[1]
    assert first[2].keys() == again[2].keys()
    assert all(torch.equal(first[2][name], again[2][name]) for name in first[2])
    # The run did train: its weights moved away from the model it started from.
    start = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    assert set(start) == set(first[2])
    assert not all(torch.equal(first[2][name].cpu(), start[name]) for name in start)
    # Another seed samples other completions from the first step: the comparison above can fail.
    other = run_once(
        tiny_spec(tiny_model_path, tmp_path / "c", optim={**settings["optim"], "seed": 8, "total_steps": 1})
    )
    assert other[1][0] != first[1][0]
