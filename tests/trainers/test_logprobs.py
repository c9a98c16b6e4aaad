import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.logprobs import TokenBatch, batched_logprobs, micro_batches, token_logprobs

PROMPTS = [[4, 10, 11, 12, 2, 5], [4, 20, 2, 5], [4, 30, 31, 2, 5]]
COMPLETIONS = [[40, 41, 42], [50], [60, 61, 62, 63, 2]]


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()


def one_by_one(model, temperature=1.0):
    """Reference: each sequence alone, no padding, full logits, plain log_softmax."""
    out = []
    for p, c in zip(PROMPTS, COMPLETIONS, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1] / temperature
        logp = torch.log_softmax(logits, -1)
        out.append((logp.gather(-1, torch.tensor(c)[:, None]).squeeze(-1), -(logp.exp() * logp).sum(-1)))
    return out


def test_the_batch_lays_prompts_left_and_completions_right():
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    assert batch.prompt_len == 6 and batch.completion_mask.shape == (3, 5)
    assert batch.input_ids[1].tolist() == [0, 0, 4, 20, 2, 5, 50, 0, 0, 0, 0]
    assert batch.attention_mask[1].tolist() == [0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert batch.completion_mask.sum(-1).tolist() == [3, 1, 5]


def test_select_trims_columns_that_are_padding_in_every_row():
    part = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0).select(slice(1, 2))
    assert part.input_ids.tolist() == [[4, 20, 2, 5, 50]]
    assert part.completion_mask.tolist() == [[1.0]]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_batched_logprobs_and_entropy_match_each_sequence_alone(model, temperature):
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    logp, entropy = batched_logprobs(model, batch, micro_batch_size=2, temperature=temperature, with_entropy=True)
    for i, (want_logp, want_entropy) in enumerate(one_by_one(model, temperature)):
        n = len(COMPLETIONS[i])
        assert logp[i, :n].tolist() == pytest.approx(want_logp.tolist(), abs=1e-5)
        assert entropy[i, :n].tolist() == pytest.approx(want_entropy.tolist(), abs=1e-5)
        assert logp[i, n:].abs().sum() == 0  # masked positions are zeroed


def test_the_entropy_has_a_gradient_only_when_asked(model):
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    logp, entropy = token_logprobs(model, batch, with_entropy=True)
    assert logp.requires_grad and not entropy.requires_grad
    _, entropy = token_logprobs(model, batch, with_entropy=True, entropy_grad=True)
    assert entropy.requires_grad


def test_micro_batches_group_similar_lengths_and_cover_every_row():
    batch = TokenBatch.build(PROMPTS * 2, [[1] * 9, [1], [1] * 5, [1] * 2, [1] * 8, [1]], pad_id=0)
    parts = micro_batches(batch, 2)
    assert [p.tolist() for p in parts] == [[1, 5], [3, 2], [4, 0]]  # lengths 1,1 | 2,5 | 8,9
    assert batch.select(parts[0]).completion_mask.shape == (2, 1)  # short completions pay for no padding


def test_rows_sharing_a_prompt_get_the_logprobs_and_gradients_of_each_sequence_alone(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).train()
    prompts = [PROMPTS[0]] * 3 + [PROMPTS[1]] * 2  # two groups: one pass over each prompt
    completions = [[40, 41, 42], [43], [44, 45], [50, 51], [52, 53, 54, 55]]
    batch = TokenBatch.build(prompts, completions, pad_id=0)
    logp, _ = token_logprobs(model, batch)
    (logp * batch.completion_mask).sum().backward()
    shared_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        alone, _ = token_logprobs(model, TokenBatch.build([p], [c], pad_id=0))
        assert logp[i, : len(c)].tolist() == pytest.approx(alone[0].tolist(), abs=1e-5)
        alone.sum().backward()  # gradients accumulate over the sequences
    for shared, summed in zip(shared_grads, (p.grad for p in model.parameters()), strict=True):
        assert torch.allclose(shared, summed, atol=1e-5)
