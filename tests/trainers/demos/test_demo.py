import json

import pytest

from trainers.demos.demo import DEMO_LETTERS, demo_spec, make_demo_dataset
from trainers.rewards.rubric import score_pairs
from trainers.spec import RunSpec


def test_the_demo_spec_is_a_valid_run_spec(tmp_path):
    data = make_demo_dataset(tmp_path / "d.jsonl")
    spec = RunSpec.model_validate(demo_spec("/models/tiny", data, tmp_path / "out", optim={"total_steps": 5}))
    assert spec.optim.total_steps == 5 and spec.optim.lr == 2e-3  # overrides merge into a section
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert rows == [{"prompt": f"Repeat the letter: {c}", "answer": c} for c in DEMO_LETTERS]


@pytest.mark.parametrize(
    ("completion", "reward"),
    [("c c c", 1.0), ("cccc", 1.0), ("ccab", 0.5), ("the cat", 1 / 6), ("", 0.0), ("dddd", 0.0)],
)
def test_the_demo_reward_is_the_share_of_the_requested_letter(tmp_path, completion, reward):
    rubric = demo_spec("m", "d.jsonl", "out")["rubric"]
    (result,) = score_pairs(rubric, [{"prompt": "Repeat the letter: c", "completion": completion, "answer": "c"}])
    assert result.reward == pytest.approx(reward)
    assert result.scores["letter"].error is None
