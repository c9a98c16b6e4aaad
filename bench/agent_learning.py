"""Does the tiny agent learn to use its tool? The multi-turn learning check, run as a bench (it took
280 s of the test suite on 2 cores): the tiny agent model, warmed up on a mix of transcripts (some call
the tool, some guess, some make malformed calls), trained with GRPO in the `lookup` environment, must
call the tool well-formed more often and earn more reward on held-out box names, and the reward must
come from tool use: the code is drawn per episode, so only the tool's output holds it. Several training
seeds from one warm model: each must learn, and their mean must clear the margins (a single RL run of
50 steps at this scale has heavy tails). See trainers/demos/agent_demo.py.

    python bench/agent_learning.py              # seeds 0 1 2, as the test suite ran it until 26 Nov
    python bench/agent_learning.py --seeds 0    # one run

Prints the held-out numbers before and after each seed's run and the training curves; exits 1 when a
margin is missed, naming it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainers.demos.agent_demo import HELD_OUT_BOXES, agent_demo_spec, make_agent_dataset, warm_agent_model  # noqa: E402
from trainers.episodes import ToolCall  # noqa: E402
from trainers.report import MemoryReporter, Rollout  # noqa: E402
from trainers.rollout.environments.tool_calls import well_formed  # noqa: E402
from trainers.run.evaluate import evaluate  # noqa: E402
from trainers.run.loop import train  # noqa: E402
from trainers.spec import RunSpec  # noqa: E402


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


def demo_spec(warm_agent: Path, tmp_path: Path, seed: int = 0) -> tuple[RunSpec, RunSpec]:
    """(the training spec, the same spec evaluating on the held-out box names)."""
    config = agent_demo_spec(warm_agent, make_agent_dataset(tmp_path / "boxes.jsonl"), tmp_path / "out")
    config["optim"]["seed"] = seed
    spec = RunSpec.model_validate(config)
    evaluation = spec.model_copy(deep=True)
    evaluation.data.path = str(make_agent_dataset(tmp_path / "held_out.jsonl", HELD_OUT_BOXES))
    return spec, evaluation


def margins_missed(before: HeldOut, after: HeldOut) -> list[str]:
    """What one seed's run missed of the margins every run must clear."""
    missed = []
    # Every run learns. (One run's end can fall in a dip of its well-formed rate: a clean-clone
    # CI run ended at 0.47 after 0.97 mid-run, against 0.75-0.98 in 18 runs here.)
    if after.reward < before.reward + 0.1:
        missed.append("held-out reward up by 0.1")
    if after.well_formed < before.well_formed + 0.15:
        missed.append("well-formed call rate up by 0.15")
    # The reward came with the tool: an episode that never saw a box's content can only guess
    # (1 in 100; after training at most a few dozen of the 832 episodes make no good call, so
    # 6 lucky guesses would be a surprise) ...
    if after.rewarded_without_tool > 5:
        missed.append("at most 5 rewarded episodes without the tool's output")
    # ... and nearly every rewarded held-out episode had read the code from the tool.
    if after.rewarded_with_tool < 0.95:
        missed.append("95% of rewarded episodes read the tool's output")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    # A 1 M-parameter model gains nothing from a second thread on 2 shared cores.
    torch.set_num_threads(1)
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        warm_agent = warm_agent_model(tmp_path / "agent", seed=0)  # the starting point, not what is measured
        before = held_out(demo_spec(warm_agent, tmp_path / "before")[1], None)
        print(f"before: {before}", flush=True)
        afters = []
        for seed in args.seeds:
            spec, evaluation = demo_spec(warm_agent, tmp_path / f"seed-{seed}", seed)
            reporter = MemoryReporter()
            result = train(spec, reporter)
            if result.status != "succeeded":
                missed.append(f"seed {seed}: the run ended {result.status}")
                continue
            after = held_out(evaluation, result.checkpoint)
            afters.append(after)
            curve = reporter.series("reward/mean")
            calls = reporter.series("episode/well_formed_call_rate")
            print(
                f"seed {seed}, {result.steps} steps:\n  after:  {after}\n"
                f"  training reward every 5 steps: {' '.join(f'{x:.2f}' for x in curve[::5])} ... {curve[-1]:.2f}\n"
                f"  training well-formed call rate: {' '.join(f'{x:.2f}' for x in calls[::5])} ... {calls[-1]:.2f}",
                flush=True,
            )
            missed += [f"seed {seed}: {m}" for m in margins_missed(before, after)]
        # And on average over the seeds, by the margins a single run was first held to.
        if afters and mean(a.reward for a in afters) < before.reward + 0.15:
            missed.append("mean held-out reward up by 0.15")
        if afters and mean(a.well_formed for a in afters) < before.well_formed + 0.3:
            missed.append("mean well-formed call rate up by 0.3")
    print("every margin cleared" if not missed else "missed: " + "; ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
