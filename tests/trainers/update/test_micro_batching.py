"""Micro-batch splits (hand-computed), and the same loss, gradients and logprobs whichever is chosen."""

import random
from dataclasses import replace

import pytest
import torch

from tests.trainers.helpers import kept_gradients, tiny_spec, update_parts
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import batched_logprobs
from trainers.update.micro_batching import MODES, MicroBatching, by_count, by_packed_tokens, by_padded_tokens

#                     row:  0   1  2  3  4  5
SKEWED = TokenBatch.build([[1, 2]] * 6, [[7] * n for n in (9, 1, 5, 2, 8, 1)], pad_id=0)


def as_lists(parts: list[torch.Tensor]) -> list[list[int]]:
    return [p.tolist() for p in parts]


def test_by_count_groups_similar_lengths_and_trims_their_padding():
    parts = by_count(SKEWED, 2)
    assert as_lists(parts) == [[1, 5], [3, 2], [4, 0]]  # completion lengths 1,1 | 2,5 | 8,9
    assert SKEWED.select(parts[0]).completion_mask.shape == (2, 1)  # short completions pay for no padding


def test_balanced_fills_each_micro_batch_up_to_its_padded_token_budget():
    # Sorted by completion length: rows 1, 5, 3 (1, 1, 2 tokens) fit 3 x (2 + 2) = 12 tokens; row 2
    # (5 tokens) would make 4 x 7 = 28. Rows 2, 4, 0 (7, 10, 11 tokens with the prompt) each fill a pass.
    parts = by_padded_tokens(SKEWED, 12)
    assert as_lists(parts) == [[1, 5, 3], [2], [4], [0]]
    assert all(SKEWED.select(p).input_ids.numel() <= 12 for p in parts)


def test_packed_bins_hold_at_most_the_budget_of_real_tokens():
    # Sequence lengths (prompt + completion) 11, 3, 7, 4, 10, 3; longest first into the first bin with room.
    assert as_lists(by_packed_tokens(SKEWED, 12)) == [[0], [4], [2, 3], [1, 5]]
    # A sequence longer than the budget is a micro-batch of its own.
    assert as_lists(by_packed_tokens(SKEWED, 8)) == [[0], [4], [2], [1, 3], [5]]  # 7 fills one; 4 + 3 another


@pytest.mark.parametrize("mode", MODES)
def test_every_row_is_in_exactly_one_micro_batch(mode):
    rng = random.Random(0)
    prompts = [[1] * rng.randint(1, 9) for _ in range(40)]
    completions = [[2] * rng.choice([1, 2, 3, 30, 60]) for _ in range(40)]
    batch = TokenBatch.build(prompts, completions, pad_id=0)
    rows = torch.cat(MicroBatching(mode, size=3, tokens=48).split(batch)).tolist()
    assert sorted(rows) == list(range(40))


def test_an_unknown_mode_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="valid: padded, balanced, packed"):
        MicroBatching("sorted")


@pytest.fixture(scope="module")
def update(tiny_model_path, tmp_path_factory):
    """The policy update alone (no trainer: no engine, rubric or data)."""
    spec = tiny_spec(
        tiny_model_path,
        tmp_path_factory.mktemp("micro-batching"),
        algorithm={"kl_beta": 0.05, "entropy_coef": 0.01, "loss_agg_mode": "seq-mean-token-mean"},
    )
    return update_parts(spec)[0]


def training_batch(device: torch.device | str = "cpu"):
    """3 prompts shared by groups of 3, 2 and 3 samples; completions of 2 to 40 tokens with turns:
    the observation stretches are not trained on (holes in the mask)."""
    g = torch.Generator().manual_seed(0)
    prompts = [[4, 10, 11, 12, 2, 5]] * 3 + [[4, 20, 2, 5]] * 2 + [[4, 30, 31, 32, 33, 34, 35, 2, 5]] * 3
    lengths = [2, 40, 3, 2, 35, 4, 30, 3]
    completions = [torch.randint(6, 300, (n,), generator=g).tolist() for n in lengths]
    batch = TokenBatch.build(prompts, completions, pad_id=0, device=device)
    trained = batch.completion_mask.clone()
    trained[1, 10:18] = 0  # a tool result inside the second sample's episode
    trained[4, 5:9] = 0
    trained[6, 20:29] = 0
    advantages = torch.randn(trained.shape, generator=g).to(device) * trained
    return batch, trained, advantages


@pytest.mark.parametrize("mode", ["balanced", "packed"])
def test_a_pass_gives_the_padded_loss_and_gradients(update, mode):
    batch, trained, advantages = training_batch(update.lockstep.device)
    padded = MicroBatching("padded", size=3)
    old = batched_logprobs(update.model, batch, micro_batching=padded)[0]
    old = old + 0.05 * torch.randn(old.shape, generator=torch.Generator().manual_seed(1)).to(
        old.device
    )  # ratios away from 1
    ref = old + 0.1
    # The longest sequence (9 + 40 tokens) is over the 48-token budget: it gets a micro-batch of its own.
    budgets = {"micro_batch_size": 3, "micro_batch_tokens": 48}
    results = {}
    for name in ("padded", mode):
        spec = update.spec.model_copy(
            update={"optim": update.spec.optim.model_copy(update={"micro_batching": name, **budgets})}
        )
        with kept_gradients() as kept:
            metrics = replace(update.optimise, spec=spec)(batch, trained, advantages, old, ref, None)
        results[name] = metrics, kept["grads"]
    assert len(MicroBatching.of(spec.optim).split(batch)) != len(padded.split(batch))
    (want, want_grads), (got, got_grads) = results["padded"], results[mode]
    for key in ("actor/loss", "actor/kl", "actor/entropy"):
        assert got[key] == pytest.approx(want[key], abs=1e-5)
    assert any(g.abs().max() > 1e-3 for g in want_grads)
    for g_got, g_want in zip(got_grads, want_grads, strict=True):
        assert (g_got - g_want).abs().max() < 1e-5


@pytest.mark.parametrize("mode", ["balanced", "packed"])
def test_frozen_logprobs_and_entropy_equal_the_padded_ones(update, mode):
    batch, _, _ = training_batch(update.lockstep.device)
    model = update.model.eval()
    want = batched_logprobs(model, batch, micro_batching=MicroBatching("padded", size=3), with_entropy=True)
    got = batched_logprobs(model, batch, micro_batching=MicroBatching(mode, tokens=48), with_entropy=True)
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() < 1e-5
        assert (g * (1 - batch.completion_mask)).abs().sum() == 0
