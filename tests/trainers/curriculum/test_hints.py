"""The hint schedule, worked by hand: a sequence of outcomes -> the hint fractions used."""

from dataclasses import dataclass

import pytest

from trainers.curriculum.hints import Hinter, HintSchedule, hint_token_count, hinted_prompt
from trainers.data.prompts import Prompt
from trainers.data.rows import PromptRow
from trainers.rewards.sample import RubricResult

SOLUTION = "the answer is yes please"  # 5 tokens in the tiny model's BPE: the / answer / is / yes / please


def schedule() -> HintSchedule:
    return HintSchedule(start=0.5, minimum=0.1, maximum=0.9, shrink=0.5)


def test_a_sequence_of_outcomes_gives_the_fractions_worked_by_hand():
    s = schedule()
    used = []
    # step 1: unhinted fail -> 0.5 (start); hinted fail -> 0.5 / 0.5 = 1.0, capped at 0.9; hinted pass -> 0.45
    s.observe_unhinted("p", passed=False)
    used.append(s.level("p"))
    s.observe_hinted("p", used[-1], passed=False)
    used.append(s.level("p"))
    s.observe_hinted("p", used[-1], passed=True)
    # steps 2-4: unhinted fail, hinted pass: 0.45 -> 0.225 -> 0.1125 -> max(0.1, 0.05625) = 0.1
    for _ in range(3):
        s.observe_unhinted("p", passed=False)
        used.append(s.level("p"))
        s.observe_hinted("p", used[-1], passed=True)
    assert used == pytest.approx([0.5, 0.9, 0.45, 0.225, 0.1125])
    assert s.level("p") == pytest.approx(0.1)
    # step 5: the prompt passes without a hint: its level is dropped, the next failure starts over.
    s.observe_unhinted("p", passed=True)
    assert "p" not in s.levels and s.level("p") == 0.5
    # Each prompt keeps its own level.
    s.observe_hinted("q", 0.5, passed=True)
    assert s.level("q") == 0.25 and s.level("p") == 0.5


def test_the_levels_survive_a_state_dict_round_trip():
    s = schedule()
    s.observe_hinted("p", 0.5, passed=True)
    restored = schedule()
    restored.load_state_dict(s.state_dict())
    assert restored.levels == {"p": 0.25}


@pytest.mark.parametrize(
    ("n", "fraction", "expected"),
    [(10, 0.5, 5), (10, 0.25, 3), (5, 0.5, 3), (5, 0.25, 2), (5, 0.1, 1), (10, 0.95, 9), (5, 0.9, 4), (1, 0.5, 0)],
)
def test_the_hint_is_ceil_of_the_fraction_of_the_tokens_leaving_at_least_one(n, fraction, expected):
    assert hint_token_count(n, fraction) == expected


def prompt(solution=SOLUTION, pid="p") -> Prompt:
    row = PromptRow(id=pid, row=1, prompt="Say it", fields={"solution": solution})
    return Prompt(row=row, text="<|user|>Say it<|eos|><|assistant|>", token_ids=[4, 10, 11, 2, 5])


def test_a_hinted_prompt_ends_with_the_solutions_first_tokens(tiny_tokenizer):
    hinted = hinted_prompt(prompt(), tiny_tokenizer, "solution", 0.5)
    solution_ids = tiny_tokenizer(SOLUTION, add_special_tokens=False).input_ids
    assert len(solution_ids) == 5
    assert hinted.token_ids == [4, 10, 11, 2, 5, *solution_ids[:3]]
    assert hinted.hint.text == "the answer is" and hinted.hint.num_tokens == 3 and hinted.hint.fraction == 0.5
    assert hinted.text.endswith("<|assistant|>the answer is")
    assert hinted.id == "p"
    assert hinted_prompt(prompt(solution=""), tiny_tokenizer, "solution", 0.5) is None
    assert hinted_prompt(prompt(solution="the"), tiny_tokenizer, "solution", 0.5) is None  # one token: nothing to cut


@dataclass
class Scored:
    prompt: Prompt
    results: list[RubricResult]


def scored(p: Prompt, rewards) -> Scored:
    return Scored(p, [RubricResult(reward=r, scores={}) for r in rewards])


def test_retries_replace_failed_groups_and_lengthen_the_hint_until_one_passes(tiny_tokenizer):
    # `generate` stands in for the engine and the rubric: the outcomes of each hinted retry are this
    # test's input, given per prompt in order; the schedule's response to them is what is checked.
    outcomes = {"a": [[0, 0], [0, 1]], "b": [[1, 0]]}
    asked: list[list[tuple[str, float]]] = []

    def generate(prompts, sizes):
        assert sizes == [2] * len(prompts)  # as large as the groups they replace
        asked.append([(p.id, p.hint.fraction) for p in prompts])
        return [scored(p, outcomes[p.id].pop(0)) for p in prompts]

    hinter = Hinter(schedule(), tiny_tokenizer, "solution", max_retries=3, pass_reward=1.0)
    groups = [scored(prompt(pid="a"), [0, 0]), scored(prompt(pid="b"), [0, 0]), scored(prompt(pid="c"), [1, 0])]
    out, hinted = hinter.retry(groups, generate)
    # Retry 1: a and b at 0.5; b passes (-> 0.25), a fails (-> 0.9). Retry 2: a alone at 0.9, passes (-> 0.45).
    assert asked == [[("a", 0.5), ("b", 0.5)], [("a", 0.9)]]
    assert hinter.schedule.levels == pytest.approx({"a": 0.45, "b": 0.25})
    assert [g.prompt.hint.fraction for g in hinted] == [0.5, 0.5, 0.9]
    assert out[0] is hinted[2] and out[1] is hinted[1] and out[2] is groups[2]  # c passed: untouched
    # 2 groups hinted; 6 hinted samples of which 2 passed; fractions 0.5, 0.5, 0.9.
    assert hinter.step_metrics() == pytest.approx(
        {"hints/groups_hinted": 2.0, "hints/hinted_pass_rate": 2 / 6, "hints/mean_fraction": 1.9 / 3}
    )
    assert hinter.step_metrics() == {"hints/groups_hinted": 0.0}  # the count starts again each step


def test_a_group_passing_at_the_rubric_threshold_is_not_hinted(tiny_tokenizer):
    hinter = Hinter(schedule(), tiny_tokenizer, "solution", max_retries=1, pass_reward=1.0)
    # reward 0.5 is below pass_reward, but the rubric's threshold says it passed: no retry.
    group = Scored(prompt(), [RubricResult(reward=0.5, scores={}, passed=True)])
    out, hinted = hinter.retry([group], lambda prompts, sizes: pytest.fail("no retry expected"))
    assert out == [group] and hinted == []


def test_a_solution_holding_the_templates_markers_opens_the_answer_as_text(tiny_tokenizer):
    # A dataset's solution is text: "<|system|>" in it never becomes the template's marker token.
    marker = "<|system|>"
    hinted = hinted_prompt(prompt(solution=f"the cat {marker} sat on the mat"), tiny_tokenizer, "solution", 1.0)
    marker_id = tiny_tokenizer.convert_tokens_to_ids(marker)
    hint_ids = hinted.token_ids[len(prompt().token_ids) :]
    assert len(hint_ids) == hinted.hint.num_tokens and marker_id not in hint_ids
    assert marker in hinted.hint.text
