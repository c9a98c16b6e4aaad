import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.engines.base import ENGINES, EngineUnavailable, SamplingParams, engine_class
from trainers.engines.hf import HFEngine


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    return [
        tiny_tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        for text in ("Repeat the letter: k", "What is 2 + 2?", "hi")
    ]


def test_it_returns_n_generations_per_prompt_capped_at_max_new_tokens(model, tiny_tokenizer, prompts):
    torch.manual_seed(0)
    out = HFEngine(model=model, tokenizer=tiny_tokenizer, batch_size=4).generate(
        prompts, 3, SamplingParams(max_new_tokens=6)
    )
    assert [len(group) for group in out] == [3, 3, 3]
    for g in (g for group in out for g in group):
        assert 1 <= len(g.token_ids) <= 6
        assert g.finish_reason == ("length" if len(g.token_ids) == 6 else "stop")
        assert g.text == tiny_tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert g.logprobs is None


def test_an_eos_token_ends_a_completion_with_reason_stop(tiny_model_path, tiny_tokenizer, prompts):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    model.generation_config.eos_token_id = list(range(len(tiny_tokenizer)))  # every token ends the turn
    (group,) = HFEngine(model=model, tokenizer=tiny_tokenizer).generate(
        prompts[:1], 2, SamplingParams(max_new_tokens=5)
    )
    assert [(len(g.token_ids), g.finish_reason) for g in group] == [(1, "stop"), (1, "stop")]


def test_a_stop_string_cuts_the_text_and_keeps_its_tokens(model, tiny_tokenizer, prompts):
    torch.manual_seed(1)
    params = SamplingParams(max_new_tokens=24, stop=["e"])
    gens = [g for group in HFEngine(model=model, tokenizer=tiny_tokenizer).generate(prompts, 4, params) for g in group]
    stopped = [g for g in gens if g.finish_reason == "stop"]
    assert stopped, "a random model writes an 'e' within 24 tokens"
    for g in stopped:
        assert "e" not in g.text
        assert "e" in tiny_tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert "e" not in tiny_tokenizer.decode(g.token_ids[:-1], skip_special_tokens=True)


def test_greedy_decoding_is_deterministic(model, tiny_tokenizer, prompts):
    engine = HFEngine(model=model, tokenizer=tiny_tokenizer)
    params = SamplingParams(max_new_tokens=8, temperature=0)
    first = engine.generate(prompts, 2, params)
    assert [g.token_ids for g in first[0]] == [first[0][0].token_ids] * 2
    assert [[g.token_ids for g in grp] for grp in engine.generate(prompts, 2, params)] == [
        [g.token_ids for g in grp] for grp in first
    ]


def test_logprobs_match_a_recompute_on_each_unpadded_sequence(model, tiny_tokenizer, prompts):
    torch.manual_seed(2)
    params = SamplingParams(max_new_tokens=7, temperature=0.7, logprobs=True)
    out = HFEngine(model=model, tokenizer=tiny_tokenizer, batch_size=5).generate(prompts, 3, params)
    for prompt, group in zip(prompts, out, strict=True):
        for g in group:
            ids = torch.tensor([prompt + g.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt) - 1 : -1] / 0.7
            expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
            assert g.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_sampling_leaves_the_model_in_training_mode(model, tiny_tokenizer, prompts):
    model.train()
    HFEngine(model=model, tokenizer=tiny_tokenizer).generate(prompts[:1], 1, SamplingParams(max_new_tokens=2))
    assert model.training


def test_an_unknown_engine_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown rollout engine 'sglang'; valid: transformers, vllm"):
        engine_class("sglang")


def test_an_engine_whose_module_is_missing_says_so(monkeypatch):
    monkeypatch.setitem(ENGINES, "ghost", "trainers.engines.ghost_engine:GhostEngine")
    with pytest.raises(EngineUnavailable, match="rollout engine 'ghost' is not available here"):
        engine_class("ghost")


def test_the_transformers_engine_is_registered():
    assert engine_class("transformers") is HFEngine
