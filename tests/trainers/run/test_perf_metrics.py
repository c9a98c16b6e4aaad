"""The throughput metrics a run reports (issue 6): generation and training tokens/s
separately, and the GPU memory peak where there is a GPU."""

import pytest
import torch

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.loop import train


@pytest.fixture(scope="module")
def run_metrics(tiny_model_path, tmp_path_factory):
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path_factory.mktemp("perf"), optim={"total_steps": 2})
    train(spec, reporter)
    return [values for _, values in reporter.metric_points]


def test_generation_and_training_throughput_are_reported_separately(run_metrics):
    for values in run_metrics:
        generated = values["response/length_mean"] * 2 * 4  # 2 prompts x group of 4
        assert values["perf/gen_tokens_per_s"] == pytest.approx(generated / values["timing/generate_s"], rel=1e-6)
        assert values["perf/train_tokens_per_s"] > 0
        # training runs over prompt + completion tokens, more than the completions alone
        assert values["perf/train_tokens_per_s"] * values["timing/train_s"] > generated


def test_a_step_counts_the_tokens_it_generated_and_trained_on(run_metrics):
    # What a run's usage adds up (studio.runs.usage): the completions sampled, and prompt + completion of
    # every sequence the update ran over (all groups are kept here: the tiny demo's rewards spread).
    for values in run_metrics:
        assert values["tokens/generated"] == values["response/length_mean"] * 2 * 4
        assert values["tokens/generated"] == pytest.approx(values["perf/tokens_per_s"] * values["timing/step_s"])
        assert values["tokens/trained"] == pytest.approx(values["perf/train_tokens_per_s"] * values["timing/train_s"])
        assert values["tokens/trained"] > values["tokens/generated"] and values["tokens/trained"].is_integer()


def test_the_gpu_memory_peak_is_reported_only_with_a_gpu(run_metrics):
    has_peak = all("perf/gpu_mem_peak_gb" in values for values in run_metrics)
    assert has_peak == torch.cuda.is_available()
    if has_peak:
        assert all(values["perf/gpu_mem_peak_gb"] > 0 for values in run_metrics)


def test_the_old_and_reference_logprob_passes_are_timed_inside_the_training_time(run_metrics):
    for values in run_metrics:
        assert 0 <= values["timing/old_ref_s"] <= values["timing/train_s"]


def test_the_old_logprob_pass_takes_time_when_a_second_epoch_needs_it(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}, algorithm={"ppo_epochs": 2})
    train(spec, reporter)
    (_, values), *_ = reporter.metric_points
    # a no-grad forward over the batch: measurable, and a part of the training time
    assert 0 < values["timing/old_ref_s"] < values["timing/train_s"]
