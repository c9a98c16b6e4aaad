"""Packed rows: the layout (hand-built) and the decoder's hidden states equal to each sequence alone."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from trainers.update.batches import TokenBatch
from trainers.update.logprobs import completion_hidden
from trainers.update.packing import PackedRows, first_fit_decreasing

PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
COMPLETIONS = [[10, 11, 12, 13], [14], [15, 16]]  # sequences of 7, 3 and 6 tokens


def test_first_fit_decreasing_fills_bins_longest_first_and_gives_an_oversized_item_its_own():
    #  lengths:  0  1  2  3  4  5
    lengths = [3, 9, 4, 2, 6, 12]
    # 12 > 10: alone; 9 opens a bin; 6 opens one; 4 joins 6 (10); 3 opens one; 2 joins 3.
    assert first_fit_decreasing(lengths, 10) == [[5], [1], [4, 2], [0, 3]]
    assert first_fit_decreasing([], 10) == []


def test_sequences_are_laid_end_to_end_with_positions_restarting_at_each():
    packed = PackedRows.build(TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0), row_tokens=9)
    # 7 opens row 0; 6 does not fit beside it (13 > 9) and opens row 1; 3 joins it (9).
    assert packed.input_ids.tolist() == [[1, 2, 3, 10, 11, 12, 13, 0, 0], [6, 7, 8, 9, 15, 16, 4, 5, 14]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 0, 1], [0, 1, 2, 3, 4, 5, 0, 1, 2]]
    # Flat index (row * 9 + column) of the token before each completion token; 0 past the end.
    assert packed.source.tolist() == [[2, 3, 4, 5], [16, 0, 0, 0], [12, 13, 0, 0]]


def test_a_sequence_longer_than_the_budget_gets_a_row_of_its_own():
    packed = PackedRows.build(TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0), row_tokens=4)
    assert packed.input_ids.shape == (3, 7)  # the 7- and 6-token sequences overflow: each alone, so the 3 too
    assert packed.position_ids[0].tolist() == list(range(7))


def test_a_completion_without_a_prompt_token_is_refused():
    batch = TokenBatch.build([[1, 2], [3]], [[4], [5]], pad_id=0)
    batch.attention_mask[1, :2] = 0  # row 1 now has no prompt token to predict its first one
    with pytest.raises(ValueError, match="needs a prompt token"):
        PackedRows.build(batch, row_tokens=8)


def causal_lm(family: str, attn: str):
    """A 2-layer model of each family, built from a config (random weights)."""
    if family == "gpt2":  # absolute position embeddings, read from the same restarting position ids
        return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, attn_implementation=attn))
    model_cls, config_cls = {"llama": (LlamaForCausalLM, LlamaConfig), "qwen2": (Qwen2ForCausalLM, Qwen2Config)}[family]
    config = config_cls(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, attn_implementation=attn,
    )  # fmt: skip
    return model_cls(config)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_packed_hidden_states_equal_each_sequence_alone(family, attn):
    """transformers reads the restarting position ids as sequence boundaries (block-diagonal attention)."""
    torch.manual_seed(0)
    model = causal_lm(family, attn).eval()
    batch = TokenBatch.build(PROMPTS, COMPLETIONS, pad_id=0)
    with torch.no_grad():
        packed = completion_hidden(model, batch, pack_tokens=9)  # two sequences share row 1
        for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS, strict=True)):
            ids = torch.tensor([p + c])
            alone = model.get_decoder()(input_ids=ids).last_hidden_state[0, len(p) - 1 : -1]
            torch.testing.assert_close(packed[i, : len(c)], alone, atol=1e-5, rtol=0)
