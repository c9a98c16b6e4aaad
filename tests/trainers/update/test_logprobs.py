import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.update.batches import TokenBatch
from trainers.update.logprobs import (
    batched_logprobs,
    chunk_tokens_for,
    completion_hidden,
    head_logprobs,
    head_split_unsupported,
    token_logprobs,
)
from trainers.update.micro_batching import MicroBatching

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
    logp, entropy = batched_logprobs(
        model, batch, micro_batching=MicroBatching(size=2), temperature=temperature, with_entropy=True
    )
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


def test_completion_hidden_through_the_head_gives_the_models_own_logits(model):
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    with torch.no_grad():
        hidden = completion_hidden(model, batch)  # (B, T, H)
        logits = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=(batch.attention_mask.cumsum(-1) - 1).clamp(min=0),
        ).logits[:, batch.prompt_len - 1 : -1]
    assert hidden.shape == (3, 5, model.config.hidden_size)
    real = batch.completion_mask.bool()
    assert torch.allclose(model.get_output_embeddings()(hidden)[real], logits[real], atol=1e-5)


# Groups sharing a prompt (one prompt pass each), prompts of unequal length (left padding) and
# completions of unequal length (right padding): 17 real completion tokens in a (6, 5) grid.
SHARED_PROMPTS = [PROMPTS[0]] * 3 + [PROMPTS[1]] * 2 + [PROMPTS[2]]
SHARED_COMPLETIONS = [[40, 41, 42], [43], [44, 45], [50, 51], [52, 53, 54, 55], [60, 61, 62, 63, 2]]


def logprobs_and_grads(model, batch, chunk_tokens, temperature):
    """logp, entropy and every parameter's gradient of a loss that uses both (entropy with gradient)."""
    model.zero_grad(set_to_none=True)
    logp, entropy = token_logprobs(
        model, batch, temperature=temperature, with_entropy=True, entropy_grad=True, chunk_tokens=chunk_tokens
    )
    weights = torch.linspace(-1.0, 1.0, logp.numel()).reshape(logp.shape)  # every token counts differently
    ((logp * weights + 0.1 * entropy) * batch.completion_mask).sum().backward()
    return logp.detach(), entropy.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_head_gives_the_logprobs_entropy_and_gradients_of_whole_logits(tiny_model_path, temperature):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).train()
    batch = TokenBatch.build(SHARED_PROMPTS, SHARED_COMPLETIONS, pad_id=0)
    assert batch.completion_mask.sum() == 17
    whole_logp, whole_entropy, whole_grads = logprobs_and_grads(model, batch, 0, temperature)
    for chunk in (1, 4, 5, 7, 16, 17, 64):  # 4, 5, 7 and 16 leave a shorter last chunk
        logp, entropy, grads = logprobs_and_grads(model, batch, chunk, temperature)
        assert (logp - whole_logp).abs().max() < 1e-5, chunk
        assert (entropy - whole_entropy).abs().max() < 1e-5, chunk
        for got, want in zip(grads, whole_grads, strict=True):
            assert (got - want).abs().max() < 1e-5, chunk
    assert whole_logp[batch.completion_mask == 0].abs().sum() == 0  # padding gets 0, not a logprob


def test_chunked_logprobs_without_gradient_equal_whole_logits(model):
    batch = TokenBatch.build(SHARED_PROMPTS, SHARED_COMPLETIONS, pad_id=0)
    whole = batched_logprobs(model, batch, micro_batching=MicroBatching(size=4), with_entropy=True)
    chunked = batched_logprobs(model, batch, micro_batching=MicroBatching(size=4), with_entropy=True, chunk_tokens=3)
    for a, b in zip(whole, chunked, strict=True):
        assert (a - b).abs().max() < 1e-5


def test_head_logprobs_keeps_the_shape_of_its_targets(model):
    hidden = torch.randn(2, 3, model.config.hidden_size)
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    logp, entropy = head_logprobs(model, hidden, ids, with_entropy=True, chunk_tokens=4)
    want = torch.log_softmax(model.get_output_embeddings()(hidden), -1).gather(-1, ids[..., None])[..., 0]
    assert logp.shape == entropy.shape == (2, 3)
    assert torch.allclose(logp, want, atol=1e-5)


def tiny_softcapped_model():
    """A Gemma 2 model: its logits are soft-capped (cap * tanh(logits / cap)) after the head."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=80, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, final_logit_softcapping=0.5, pad_token_id=0,
    )  # fmt: skip
    model = Gemma2ForCausalLM(config).eval()
    torch.nn.init.normal_(model.get_output_embeddings().weight, std=1.0)  # logits well past the cap
    return model


def test_a_model_with_soft_capped_logits_falls_back_to_its_own_logits():
    model = tiny_softcapped_model()
    assert "final_logit_softcapping" in head_split_unsupported(model)
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    logp, entropy = token_logprobs(model, batch, with_entropy=True, chunk_tokens=2)
    for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS, strict=True)):
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1]
            split = model.get_output_embeddings()(completion_hidden(model, TokenBatch.build([p], [c], pad_id=0)))[0]
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        assert logp[i, : len(c)].tolist() == pytest.approx(want.tolist(), abs=1e-5)
        # The head alone would have been wrong here: the cap changes the distribution.
        naive = torch.log_softmax(split, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        assert (naive - want).abs().max() > 0.1


def test_a_plain_causal_lm_takes_the_split_path(model):
    assert head_split_unsupported(model) is None


def test_the_chunk_budget_in_mib_sizes_chunks_by_the_vocabulary(model):
    vocab = model.get_output_embeddings().weight.shape[0]
    assert chunk_tokens_for(model, 0) == 0  # whole logits
    assert chunk_tokens_for(model, 1) == 2**20 // (vocab * 4)
    assert chunk_tokens_for(model, 1e-9) == 1  # never an empty chunk
    # The default at a Qwen-sized vocabulary: 128 MiB of float32 logits is 220 positions.
    qwen_sized = torch.nn.Module()
    qwen_sized.get_output_embeddings = lambda: torch.nn.Linear(8, 151_936, bias=False)
    assert chunk_tokens_for(qwen_sized, 128) == 220
