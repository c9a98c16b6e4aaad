"""How far a sampling is (trainers.rollout.progress): lines at a bounded rate, counts that rise to the total."""

import re

from trainers.rollout.progress import LINE_PATTERN, GenerationProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_at_most_every_interval_and_end_with_the_total():
    said: list[str] = []
    clock = Clock()
    progress = GenerationProgress(said.append, every_s=5.0, clock=clock)
    with progress.sampling("step 1", 64):
        for _ in range(8):  # 8 completions a second for 8 s: the first line at 5 s, none before
            clock.now += 1.0
            progress.add(8)
            if clock.now < 105.0:
                assert said == []
    assert said == ["step 1: sampled 40 of 64 completions (5 s)", "step 1: sampled 64 of 64 completions (8 s)"]


def test_a_fast_sampling_says_nothing_and_counts_outside_a_sampling_are_ignored():
    said: list[str] = []
    clock = Clock()
    progress = GenerationProgress(said.append, every_s=5.0, clock=clock)
    progress.add(3)  # the asynchronous generator's, with no sampling begun
    with progress.sampling("step 2", 4):
        clock.now += 1.0
        progress.add(4)
    assert said == []


def test_a_batch_whose_rows_all_run_to_the_length_limit_says_its_token():
    said: list[str] = []
    clock = Clock()
    progress = GenerationProgress(said.append, every_s=5.0, clock=clock)
    with progress.sampling("the step-0 validation", 6):
        for t in range(1, 11):
            clock.now += 1.0
            progress.decoding(t, 10)
        progress.add(6)
    assert said == [
        "the step-0 validation: sampled 0 of 6 completions, the batch at token 5 of 10 (5 s)",
        "the step-0 validation: sampled 0 of 6 completions, the batch at token 10 of 10 (10 s)",
        "the step-0 validation: sampled 6 of 6 completions (10 s)",
    ]


def test_the_pattern_the_run_page_gets_matches_every_line_and_no_other():
    said: list[str] = []
    clock = Clock()
    progress = GenerationProgress(said.append, every_s=0.0, clock=clock)
    for what in ("step 3", "step 3 (round 2)", "the step-0 validation", "validation after step 4"):
        with progress.sampling(what, 2):
            clock.now += 1.0
            progress.decoding(1, 8)
            progress.add(1)
    assert len(said) == 12 and all(re.match(LINE_PATTERN, line) for line in said), said
    for other in (
        "step 3/20: reward 0.5 loss 0.1 (2.0s)",
        "starting (4/4): step 1: sampling 8 prompts x 8 completions",
    ):
        assert not re.match(LINE_PATTERN, other)
