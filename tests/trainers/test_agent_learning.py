"""THE multi-turn learning test: the tiny agent model, warmed up on a mix of transcripts (some call
the tool, some guess, some make malformed calls), trained with GRPO in the `lookup` environment,
calls the tool well-formed more often and earns more reward on held-out box names, and the reward
comes from tool use: the code is drawn per episode, so only the tool's output holds it. Three
training seeds from one warm model: each must learn, and their mean must clear the margins (a
single RL run of 50 steps at this scale has heavy tails). (See trainers/agent_demo.py.)"""

from dataclasses import dataclass
from pathlib import Path
from statistics import mean

import pytest
import torch

from trainers.demos.agent_demo import HELD_OUT_BOXES, agent_demo_spec, make_agent_dataset, warm_agent_model
from trainers.episodes import ToolCall
from trainers.report import MemoryReporter, Rollout
from trainers.rollout.environments.tool_calls import well_formed
from trainers.run.evaluate import evaluate
from trainers.run.loop import train
from trainers.spec import RunSpec


@pytest.fixture(scope="module")
def warm_agent(tmp_path_factory):
    """One warm-up for every seed: it is the starting point, not what is measured."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield warm_agent_model(tmp_path_factory.mktemp("agent"), seed=0)
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread():
    """As in test_learning.py: a 1 M-parameter model gains nothing from a second thread on 2 shared cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@dataclass
class HeldOut:
    reward: float  # the rubric's mean (exact match of the last turn with the code)
    well_formed: float  # share of episodes that called a tool, every call readable
    rewarded_without_tool: int  # rewarded episodes where no call came back with a box's content
    rewarded_with_tool: float  # share of the rewarded episodes where one did
    episodes: int

    def __str__(self) -> str:
        return (
            f"reward {self.reward:.3f}, well-formed calls {self.well_formed:.2f}, "
            f"rewarded without the tool's output {self.rewarded_without_tool}, rewarded episodes that had it "
            f"{self.rewarded_with_tool:.2f} ({self.episodes} episodes)"
        )


def called_well(rollout: Rollout) -> bool:
    return well_formed([ToolCall(**call) for turn in rollout.turns for call in turn["tool_calls"]])


def opened_a_box(rollout: Rollout) -> bool:
    """Some call came back with a box's content (not an error): the episode saw the tool's output."""
    return any(call["error"] is None for turn in rollout.turns for call in turn["tool_calls"])


def held_out(spec: RunSpec, checkpoint: str | None) -> HeldOut:
    spec = spec.model_copy(deep=True)
    spec.eval.checkpoint = checkpoint
    spec.eval.samples_per_prompt = EVAL_SAMPLES
    reporter = MemoryReporter()
    metrics = evaluate(spec, reporter).metrics
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    rewarded = [r for r in rollouts if r.reward > 0]
    return HeldOut(
        reward=metrics["eval/reward/mean"],
        well_formed=sum(map(called_well, rollouts)) / len(rollouts),
        rewarded_without_tool=sum(not opened_a_box(r) for r in rewarded),
        rewarded_with_tool=sum(map(opened_a_box, rewarded)) / len(rewarded) if rewarded else 0.0,
        episodes=len(rollouts),
    )


# 52 held-out box names x 16 episodes: at 208 (x 4) the same warm model's reward read anywhere
# from 0.096 to 0.212 depending on the evaluation's seed, as much as half the gain being measured.
EVAL_SAMPLES = 16
SEEDS = (0, 1, 2)


def demo_spec(warm_agent: Path, tmp_path: Path, seed: int = 0) -> tuple[RunSpec, RunSpec]:
    """(the training spec, the same spec evaluating on the held-out box names)."""
    config = agent_demo_spec(warm_agent, make_agent_dataset(tmp_path / "boxes.jsonl"), tmp_path / "out")
    config["optim"]["seed"] = seed
    spec = RunSpec.model_validate(config)
    evaluation = spec.model_copy(deep=True)
    evaluation.data.path = str(make_agent_dataset(tmp_path / "held_out.jsonl", HELD_OUT_BOXES))
    return spec, evaluation


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_the_tiny_agent_learns_to_call_the_tool_and_copy_the_code(warm_agent, tmp_path):
    before = held_out(demo_spec(warm_agent, tmp_path / "before")[1], None)  # one starting point for every seed
    print(f"\nbefore: {before}")
    afters = []
    for seed in SEEDS:
        spec, evaluation = demo_spec(warm_agent, tmp_path / f"seed-{seed}", seed)
        reporter = MemoryReporter()
        result = train(spec, reporter)
        assert result.status == "succeeded"
        after = held_out(evaluation, result.checkpoint)
        afters.append(after)
        curve = reporter.series("reward/mean")
        calls = reporter.series("episode/well_formed_call_rate")
        print(
            f"seed {seed}, {result.steps} steps:\n  after:  {after}\n"
            f"  training reward every 5 steps: {' '.join(f'{x:.2f}' for x in curve[::5])} ... {curve[-1]:.2f}\n"
            f"  training well-formed call rate: {' '.join(f'{x:.2f}' for x in calls[::5])} ... {calls[-1]:.2f}"
        )
        # Every run learns. (One run's end can fall in a dip of its well-formed rate: a clean-clone
        # CI run ended at 0.47 after 0.97 mid-run, against 0.75-0.98 in 18 runs here.)
        assert after.reward >= before.reward + 0.1
        assert after.well_formed >= before.well_formed + 0.15
        # The reward came with the tool: an episode that never saw a box's content can only guess
        # (1 in 100; after training at most a few dozen of the 832 episodes make no good call, so
        # 6 lucky guesses would be a surprise) ...
        assert after.rewarded_without_tool <= 5
        # ... and nearly every rewarded held-out episode had read the code from the tool.
        assert after.rewarded_with_tool >= 0.95
    # And on average over the seeds, by the margins a single run was first held to.
    assert mean(a.reward for a in afters) >= before.reward + 0.15
    assert mean(a.well_formed for a in afters) >= before.well_formed + 0.3
