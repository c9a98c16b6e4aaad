"""Prompt samplers: uniform is the data order; Thompson choices follow the posteriors and repeat
under a seed; skip_solved passes over settled prompts and re-checks them at its rate."""

import numpy as np
import pytest

from tests.trainers.curriculum.conftest import make_prompts
from trainers.curriculum.samplers import PROMPT_SAMPLERS, SamplerPool
from trainers.curriculum.stats import PromptBook
from trainers.data.source import PromptSource
from trainers.spec import CurriculumSpec


def pool(prompts, seed=0, **spec) -> SamplerPool:
    book = PromptBook([p.id for p in prompts])
    return SamplerPool(PromptSource(prompts, seed=3), book, np.random.default_rng(seed), CurriculumSpec(**spec))


def ids(prompts) -> list[str]:
    return [p.id for p in prompts]


def test_uniform_serves_the_data_order(prompts):
    sampled, reference = pool(prompts), PromptSource(prompts, seed=3)
    draws = [ids(PROMPT_SAMPLERS.get("uniform")(sampled, 4)) for _ in range(3)]
    assert draws == [ids(reference.next_batch(4)) for _ in range(3)]


def test_online_difficulty_picks_prompts_near_the_target(prompts):
    p = pool(prompts, sampler="online_difficulty", exploration_floor=0.0, target_pass_rate=0.5)
    # Posteriors so narrow that a Thompson draw lands near the mean: p2 and p4 sit at 0.5, the rest far.
    for pid, rate in {"p0": 1.0, "p1": 0.0, "p2": 0.5, "p3": 0.95, "p4": 0.5, "p5": 0.05}.items():
        p.book[pid].alpha, p.book[pid].beta = 1 + 400 * rate, 1 + 400 * (1 - rate)
    for _ in range(5):
        assert sorted(ids(PROMPT_SAMPLERS.get("online_difficulty")(p, 2))) == ["p2", "p4"]


def test_online_difficulty_choices_repeat_under_a_seed_and_differ_across_seeds():
    prompts = make_prompts(40)

    def run(seed):
        p = pool(prompts, seed=seed, sampler="online_difficulty")
        out = []
        for step in range(6):
            chosen = PROMPT_SAMPLERS.get("online_difficulty")(p, 5)
            out.append(ids(chosen))
            for k, prompt in enumerate(chosen):
                p.book.observe(step, prompt.id, [(k + step) % 3 == 0, k % 2 == 0])
        return out

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_the_exploration_floor_keeps_drawing_in_data_order(prompts):
    p = pool(prompts, sampler="online_difficulty", exploration_floor=1.0)
    reference = PromptSource(prompts, seed=3)
    assert ids(PROMPT_SAMPLERS.get("online_difficulty")(p, 4)) == ids(reference.next_batch(4))


def test_no_prompt_starves_under_the_exploration_floor():
    prompts = make_prompts(10)
    p = pool(prompts, sampler="online_difficulty", exploration_floor=0.2)
    for prompt in prompts[1:]:  # all but p0 sit at the target; p0 is (believed) always solved
        p.book[prompt.id].alpha, p.book[prompt.id].beta = 200.0, 200.0
    p.book["p0"].alpha, p.book["p0"].beta = 400.0, 1.0
    drawn = [pid for _ in range(50) for pid in ids(PROMPT_SAMPLERS.get("online_difficulty")(p, 4))]
    assert "p0" in drawn
    assert drawn.count("p0") < drawn.count("p5")  # the floor's share only: ~ 50 * 4 * 0.2 / 10 = 4 draws


def test_a_batch_larger_than_the_data_draws_the_nearest_again():
    prompts = make_prompts(3)
    chosen = PROMPT_SAMPLERS.get("online_difficulty")(pool(prompts, exploration_floor=0.0), 5)
    assert len(chosen) == 5 and {p.id for p in chosen} == {"p0", "p1", "p2"}


def test_skip_solved_passes_over_settled_prompts_and_rechecks_them(prompts):
    p = pool(prompts, sampler="skip_solved", skip_after=2, recheck_rate=0.0)
    reference = ids(PromptSource(prompts, seed=3).next_batch(12))
    solved, failed = reference[0], reference[1]
    for step in (1, 2):
        p.book.observe(step, solved, [True, True])
        p.book.observe(step, failed, [False, False])
    p.book.observe(1, reference[2], [True, True])  # once only: not settled
    draws = ids(PROMPT_SAMPLERS.get("skip_solved")(p, 8))
    assert draws == [pid for pid in reference if pid not in (solved, failed)][:8]

    p = pool(prompts, sampler="skip_solved", skip_after=2, skip_failed=False, recheck_rate=0.0)
    for step in (1, 2):
        p.book.observe(step, solved, [True, True])
        p.book.observe(step, failed, [False, False])
    assert failed in ids(PROMPT_SAMPLERS.get("skip_solved")(p, 6))


def test_skip_solved_rechecks_at_its_rate():
    prompts = make_prompts(4)
    p = pool(prompts, sampler="skip_solved", skip_after=1, recheck_rate=0.25)
    for prompt in prompts[1:]:
        p.book.observe(1, prompt.id, [True])
    drawn = [pid for _ in range(400) for pid in ids(PROMPT_SAMPLERS.get("skip_solved")(p, 1))]
    # Each pass over the data takes p0 and, with probability 0.25 each, the 3 settled prompts:
    # 1 + 3 * 0.25 = 1.75 takes a pass, of which p0's share is 1 / 1.75 = 4 / 7.
    assert drawn.count("p0") / len(drawn) == pytest.approx(4 / 7, abs=0.07)


def test_when_every_prompt_is_settled_skip_solved_still_serves():
    prompts = make_prompts(3)
    p = pool(prompts, sampler="skip_solved", skip_after=1, recheck_rate=0.0)
    for prompt in prompts:
        p.book.observe(1, prompt.id, [True])
    assert len(PROMPT_SAMPLERS.get("skip_solved")(p, 5)) == 5
