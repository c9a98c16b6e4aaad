"""A step's sampling and the step-0 validation say how far they are in the run's log (issue 39: on a CPU with
the real model they take minutes with nothing said). The tiny model samples in well under the interval, so the
interval is 0 here: every finished completion and every token position of a batch may give a line."""

import re

from tests.trainers.helpers import tiny_spec
from trainers.report import MemoryReporter
from trainers.rollout import progress
from trainers.run.loop import train

LINE = re.compile(r"^(step 1|the step-0 validation): sampled (\d+) of (\d+) completions(, the batch at token \d+ of \d+)? \(\d+ s\)$")


def counts(lines: list[str], what: str) -> list[tuple[int, int]]:
    return [(int(m[2]), int(m[3])) for line in lines if (m := LINE.match(line)) and m[1] == what]


def test_counts_rise_to_the_total_before_the_step_and_the_validation_report(tiny_model_path, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    reporter = MemoryReporter()
    spec = tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}, algorithm={"group_size": 4},
                     validation={"holdout_fraction": 0.25, "samples_per_prompt": 2})  # fmt: skip
    assert train(spec, reporter).status == "succeeded"
    lines = reporter.lines
    step = counts(lines, "step 1")
    assert len(step) >= 2, lines  # a part on the way, then the whole
    assert {total for _, total in step} == {2 * 4}
    assert [done for done, _ in step] == sorted(done for done, _ in step) and step[-1][0] == 8
    assert step[0][0] < 8 and ", the batch at token 1 of " in next(line for line in lines if LINE.match(line))
    validation = counts(lines, "the step-0 validation")
    assert validation and validation[-1][0] == validation[-1][1], lines
    assert [done for done, _ in validation] == sorted(done for done, _ in validation)
    # Said while sampling: before the step's own line and the validation's.
    first_step_line = next(i for i, line in enumerate(lines) if line.startswith("step 1/1"))
    assert max(i for i, line in enumerate(lines) if line.startswith("step 1: sampled")) < first_step_line
    val_line = next(i for i, line in enumerate(lines) if line.startswith("validation after step 0"))
    assert max(i for i, line in enumerate(lines) if line.startswith("the step-0 validation: sampled")) < val_line


def test_at_the_usual_interval_a_fast_run_logs_no_progress(tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    assert train(tiny_spec(tiny_model_path, tmp_path, optim={"total_steps": 1}), reporter).status == "succeeded"
    assert not [line for line in reporter.lines if " completions (" in line]
