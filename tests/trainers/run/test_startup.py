"""Before its first step a run says in its log what it is doing and how far it is (issue 39: a cold
start showed "step 0/20, ETA –" for minutes with nothing in the log)."""

import re

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.run.loop import train


def starting(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("starting (")]


def test_each_part_of_the_start_is_logged_in_order_before_the_first_step(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}, algorithm={"group_size": 4, "kl_beta": 0.04},
                     validation={"holdout_fraction": 0.25, "samples_per_prompt": 2})  # fmt: skip
    assert train(spec, reporter).status == "succeeded"
    said = starting(reporter.lines)
    assert [re.sub(r":.*", "", line) for line in said] == [f"starting ({n}/4)" for n in (1, 2, 3, 4)], said
    assert said[0] == f"starting (1/4): loading the model {tiny_model_path} and its frozen reference (kl_beta > 0)"
    assert said[1].startswith(
        "starting (2/4): starting the transformers engine, reading the prompts (the last part took "
    )
    assert re.match(r"starting \(3/4\): the step-0 validation: \d+ held-out prompts x 2 samples \(the last", said[2])
    assert said[3].startswith("starting (4/4): step 1: sampling 2 prompts x 4 completions, then the update")
    # All before the step's own line and after the validation's (the page shows the latest until step 1).
    order = reporter.lines
    assert order.index(said[3]) < order.index(next(line for line in order if line.startswith("step 1/1")))
    assert order.index(said[2]) < order.index(
        next(line for line in order if line.startswith("validation after step 0"))
    )


def test_without_validation_the_start_has_three_parts(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    train(tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}), reporter)
    assert [line[:14] for line in starting(reporter.lines)] == ["starting (1/3)", "starting (2/3)", "starting (3/3)"]
