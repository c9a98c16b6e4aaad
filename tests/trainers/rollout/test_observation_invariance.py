"""Observation tokens are never trained on: the loss and its gradient do not depend on values at
observation positions (old / reference / engine logprobs, advantages), nor on the tokens of an
episode's final observation (nothing sampled follows them). They do depend on sampled tokens."""

import pytest
import torch

from tests.trainers import episode_envs  # noqa: F401  (registers the "test-echo" kind)
from tests.trainers.helpers import tiny_spec
from trainers.episodes import Episode, Turn
from trainers.report import MemoryReporter
from trainers.rewards.sample import RubricResult
from trainers.run.loop import Trainer
from trainers.update import passes
from trainers.update.groups import Group
from trainers.update.step_batch import build_step_batch


@pytest.fixture(scope="module")
def trainer(tiny_model_path, tmp_path_factory):
    spec = tiny_spec(
        tiny_model_path,
        tmp_path_factory.mktemp("invariance"),
        # KL to a reference, old logprobs (two passes) and truncated importance weights: every
        # per-token quantity the loss reads is in play.
        algorithm={"kl_beta": 0.1, "ppo_epochs": 2, "tis_cap": 2.0, "policy_loss": "ppo_clip"},
        environment={"kind": "test-echo"},
    )
    t = Trainer(spec, MemoryReporter())
    yield t
    t.close()


def episode(prompt_ids, turns, rewards=(0.0, 0.0)) -> Episode:
    """`turns` as (sampled ids, observation ids) pairs; engine logprobs -1 per sampled token."""
    return Episode(
        prompt_ids=prompt_ids,
        messages=[],
        turns=[
            Turn(token_ids=s, text="", logprobs=[-1.0 - 0.1 * i for i in range(len(s))], observation_ids=o, reward=r)
            for (s, o), r in zip(turns, rewards, strict=True)
        ],
    )


def groups(final_observation=(40, 41, 42), first_token=20):
    prompt = [1, 5, 6, 7]
    episodes = [
        episode(prompt, [([first_token, 21, 22], [30, 31]), ([23, 24], list(final_observation))], (0.5, 0.0)),
        episode(prompt, [([25, 26], [30, 31, 32]), ([27, 28, 29], [])], (0.0, 1.0)),
        episode(prompt, [([33, 34, 35, 36], [])], (0.0,)),
    ]
    results = [RubricResult(reward=r, scores={}) for r in (1.0, 0.0, 0.5)]
    return [Group(prompt=None, episodes=episodes, results=results, rewards=[1.0, 0.0, 0.5])]


def loss_and_grad(trainer, grps, perturb=None):
    """One optimisation pass from the trainer's current weights: (loss, flat gradient); no step taken."""
    update = trainer.update
    batch = build_step_batch(grps, trainer.spec.algorithm, pad_id=trainer.lockstep.pad_id, device=trainer.device)
    old, ref, _ = update.old_and_reference_logprobs(batch)
    advantages = update.advantages(grps, batch, old, ref)
    if perturb is not None:
        old, ref, advantages = perturb(batch, old, ref, advantages)
    _, is_weights = update.sampler_mismatch(batch, old)
    captured = {}

    def capture(model, optimizer, max_grad_norm):
        params = [p for p in model.parameters() if p.grad is not None]
        captured["grad"] = torch.cat([p.grad.flatten() for p in params]).clone()
        optimizer.zero_grad(set_to_none=True)
        return 0.0

    apply_gradients, passes.apply_gradients = passes.apply_gradients, capture  # no step: the weights stay
    try:
        out = update.optimise(batch.tokens, batch.loss_mask, advantages, old, ref, is_weights)
    finally:
        passes.apply_gradients = apply_gradients
    return out["actor/loss"], captured["grad"]


def test_values_at_observation_positions_change_neither_loss_nor_gradient(trainer):
    loss, grad = loss_and_grad(trainer, groups())

    def scramble(batch, old, ref, advantages):
        observation = (batch.tokens.completion_mask - batch.trained).bool()  # (B, T)
        assert observation.sum() == 2 + 3 + 3  # the layout really has observation tokens
        noise = torch.randn(observation.shape) * 5
        batch.engine_logp = torch.where(observation, batch.engine_logp - noise.abs(), batch.engine_logp)
        return (
            torch.where(observation, old + noise, old),
            torch.where(observation, ref - noise, ref),
            torch.where(observation, advantages + 3 * noise, advantages),
        )

    loss2, grad2 = loss_and_grad(trainer, groups(), scramble)
    assert loss2 == pytest.approx(loss, abs=1e-6)
    assert torch.allclose(grad, grad2, atol=1e-6)


def test_the_tokens_of_a_final_observation_change_neither_loss_nor_gradient(trainer):
    loss, grad = loss_and_grad(trainer, groups(final_observation=(40, 41, 42)))
    loss2, grad2 = loss_and_grad(trainer, groups(final_observation=(50, 3, 44)))
    assert loss2 == pytest.approx(loss, abs=1e-6)
    assert torch.allclose(grad, grad2, atol=1e-6)


def test_a_different_sampled_token_changes_the_gradient(trainer):
    _, grad = loss_and_grad(trainer, groups(first_token=20))
    _, grad2 = loss_and_grad(trainer, groups(first_token=45))
    assert not torch.allclose(grad, grad2, atol=1e-4)
