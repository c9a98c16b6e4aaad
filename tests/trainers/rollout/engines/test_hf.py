import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.data.prompts import encode_chat
from trainers.models.loading import supports_lean_decode
from trainers.rollout.engines.base import EngineUnavailable, SamplingParams
from trainers.rollout.engines.catalog import ENGINES, engine_class
from trainers.rollout.engines.decode import sample_next
from trainers.rollout.engines.hf import HFEngine
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import batched_logprobs
from trainers.update.micro_batching import MicroBatching

# Behaviour tests run on both sampling paths: the lean decode loop and model.generate.
PATHS = pytest.mark.parametrize("lean", [True, False], ids=["lean", "generate"])


def engine(model, tokenizer, lean: bool, **kwargs) -> HFEngine:
    e = HFEngine(model=model, tokenizer=tokenizer, **kwargs)
    assert e.lean, "the tiny Llama takes the lean path"
    e.lean = lean
    return e


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    return [
        encode_chat(tiny_tokenizer, [{"role": "user", "content": text}])[1]
        for text in ("Repeat the letter: k", "What is 2 + 2?", "hi")
    ]


@PATHS
@pytest.mark.parametrize("batch_size", [4, 2])  # 2: a group of 3 is split over batches
def test_it_returns_n_generations_per_prompt_capped_at_max_new_tokens(model, tiny_tokenizer, prompts, lean, batch_size):
    torch.manual_seed(0)
    out = engine(model, tiny_tokenizer, lean, batch_size=batch_size).generate(
        prompts, 3, SamplingParams(max_new_tokens=6)
    )
    assert [len(group) for group in out] == [3, 3, 3]
    for g in (g for group in out for g in group):
        assert 1 <= len(g.token_ids) <= 6
        assert g.finish_reason == ("length" if len(g.token_ids) == 6 else "stop")
        assert g.text == tiny_tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert g.logprobs is None


@PATHS
def test_an_eos_token_ends_a_completion_with_reason_stop(tiny_model_path, tiny_tokenizer, prompts, lean):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    model.generation_config.eos_token_id = list(range(len(tiny_tokenizer)))  # every token ends the turn
    (group,) = engine(model, tiny_tokenizer, lean).generate(prompts[:1], 2, SamplingParams(max_new_tokens=5))
    assert [(len(g.token_ids), g.finish_reason) for g in group] == [(1, "stop"), (1, "stop")]


@PATHS
def test_a_stop_string_cuts_the_text_and_keeps_its_tokens(model, tiny_tokenizer, prompts, lean):
    torch.manual_seed(1)
    params = SamplingParams(max_new_tokens=24, stop=["e"])
    gens = [g for group in engine(model, tiny_tokenizer, lean).generate(prompts, 4, params) for g in group]
    stopped = [g for g in gens if g.finish_reason == "stop"]
    assert stopped, "a random model writes an 'e' within 24 tokens"
    for g in stopped:
        assert "e" not in g.text
        assert "e" in tiny_tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert "e" not in tiny_tokenizer.decode(g.token_ids[:-1], skip_special_tokens=True)


@PATHS
def test_a_stop_string_can_stay_at_the_end_of_the_text(model, tiny_tokenizer, prompts, lean):
    torch.manual_seed(1)
    params = SamplingParams(max_new_tokens=24, stop=["e"], include_stop_in_text=True)
    gens = [g for group in engine(model, tiny_tokenizer, lean).generate(prompts, 4, params) for g in group]
    stopped = [g for g in gens if g.finish_reason == "stop" and "e" in g.text]
    assert stopped, "a random model writes an 'e' within 24 tokens"
    for g in stopped:
        assert g.text.endswith("e") and g.text.count("e") == 1
        assert g.text == tiny_tokenizer.decode(g.token_ids, skip_special_tokens=True)[: len(g.text)]


@PATHS
def test_greedy_decoding_is_deterministic(model, tiny_tokenizer, prompts, lean):
    e = engine(model, tiny_tokenizer, lean)
    params = SamplingParams(max_new_tokens=8, temperature=0)
    first = e.generate(prompts, 2, params)
    assert [g.token_ids for g in first[0]] == [first[0][0].token_ids] * 2
    assert [[g.token_ids for g in grp] for grp in e.generate(prompts, 2, params)] == [
        [g.token_ids for g in grp] for grp in first
    ]


@PATHS
def test_logprobs_match_a_recompute_on_each_unpadded_sequence(model, tiny_tokenizer, prompts, lean):
    torch.manual_seed(2)
    params = SamplingParams(max_new_tokens=7, temperature=0.7, logprobs=True)
    out = engine(model, tiny_tokenizer, lean, batch_size=5).generate(prompts, 3, params)
    for prompt, group in zip(prompts, out, strict=True):
        for g in group:
            ids = torch.tensor([prompt + g.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt) - 1 : -1] / 0.7
            expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
            assert g.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


@PATHS
def test_sampling_leaves_the_model_in_training_mode(model, tiny_tokenizer, prompts, lean):
    model.train()
    engine(model, tiny_tokenizer, lean).generate(prompts[:1], 1, SamplingParams(max_new_tokens=2))
    assert model.training


def causal_lms(vocab: int, pad_id: int) -> dict[str, torch.nn.Module]:
    """Randomly initialised small models of three families (no download): Llama-style comes
    from the fixture; GPT-2 (learned positions, fused qkv) and Qwen2 (biases, GQA) here."""
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return {
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=64, n_layer=2, n_head=4, pad_token_id=pad_id)),
        "qwen2": Qwen2ForCausalLM(
            Qwen2Config(
                vocab_size=vocab,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                pad_token_id=pad_id,
            )
        ),
    }


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen2"])
def test_lean_greedy_output_equals_generate_token_for_token(model, tiny_tokenizer, prompts, family):
    net = model if family == "llama" else causal_lms(len(tiny_tokenizer), tiny_tokenizer.pad_token_id)[family]
    params = SamplingParams(max_new_tokens=24, temperature=0, logprobs=True)
    lean, reference = engine(net, tiny_tokenizer, True), engine(net, tiny_tokenizer, False)
    got, expected = lean.generate(prompts, 2, params), reference.generate(prompts, 2, params)
    for got_group, expected_group in zip(got, expected, strict=True):
        for g, e in zip(got_group, expected_group, strict=True):
            assert (g.token_ids, g.text, g.finish_reason) == (e.token_ids, e.text, e.finish_reason)
            assert g.logprobs == pytest.approx(e.logprobs, abs=1e-4)


def test_sampled_logprobs_equal_a_batched_recompute(model, tiny_tokenizer, prompts):
    torch.manual_seed(3)
    params = SamplingParams(max_new_tokens=12, temperature=0.9, top_k=50, top_p=0.95, logprobs=True)
    out = engine(model, tiny_tokenizer, True).generate(prompts, 4, params)
    flat_prompts = [p for p, grp in zip(prompts, out, strict=True) for _ in grp]
    gens = [g for grp in out for g in grp]
    batch = TokenBatch.build(flat_prompts, [g.token_ids for g in gens], pad_id=tiny_tokenizer.pad_token_id)
    recomputed, _ = batched_logprobs(model.eval(), batch, micro_batching=MicroBatching(size=5), temperature=0.9)
    for g, row in zip(gens, recomputed, strict=True):
        assert g.logprobs == pytest.approx(row[: len(g.token_ids)].tolist(), abs=1e-4)


def test_the_cap_ends_a_completion_with_reason_length(model, tiny_tokenizer, prompts):
    e = engine(model, tiny_tokenizer, True)
    e.eos_ids = [len(tiny_tokenizer) + 1]  # an id the model never emits: only the cap ends it
    (group,) = e.generate(prompts[:1], 3, SamplingParams(max_new_tokens=5))
    assert [(len(g.token_ids), g.finish_reason) for g in group] == [(5, "length")] * 3


def test_samples_of_a_prefix_shared_group_are_independent(model, tiny_tokenizer, prompts):
    torch.manual_seed(4)
    e = engine(model, tiny_tokenizer, True)
    e.eos_ids = [len(tiny_tokenizer) + 1]
    # The same prompt twice: two groups, each prefilled once and shared by its 6 samples.
    first, second = e.generate([prompts[0], prompts[0]], 6, SamplingParams(max_new_tokens=10))
    completions = [tuple(g.token_ids) for g in first + second]
    assert len(set(completions)) == len(completions), "a random model's 10-token samples do not repeat"
    # The first tokens follow the model's next-token distribution rather than one shared draw.
    firsts = [c[0] for c in completions]
    assert len(set(firsts)) > 1


def test_top_k_of_one_and_a_tiny_top_p_pick_the_most_likely_token():
    torch.manual_seed(5)
    logits = torch.randn(6, 50)
    best = logits.argmax(-1)
    for params in (SamplingParams(top_k=1), SamplingParams(top_p=1e-6), SamplingParams(temperature=0)):
        tokens, logp = sample_next(logits, params)
        assert torch.equal(tokens, best)
        temp = params.temperature or 1.0
        assert torch.allclose(logp, torch.log_softmax(logits / temp, -1).gather(-1, best[:, None]).squeeze(-1))


def test_sampling_follows_the_temperature_scaled_distribution():
    torch.manual_seed(6)
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(20_000, 1)
    tokens, _ = sample_next(logits, SamplingParams(temperature=0.5))
    freq = torch.bincount(tokens, minlength=4).float() / len(tokens)
    assert torch.allclose(freq, torch.softmax(logits[0] / 0.5, -1), atol=0.01)


def test_a_sampled_tokens_logprob_is_its_log_softmax_at_a_large_vocabulary():
    """Unfiltered sampling takes the normaliser from its own (unnormalised) cdf, one exp pass."""
    torch.manual_seed(7)
    logits = torch.randn(32, 151_936) * 4  # wide, as a trained model's are
    for temperature in (1.0, 0.7):
        tokens, logp = sample_next(logits, SamplingParams(temperature=temperature))
        want = torch.log_softmax(logits / temperature, -1).gather(-1, tokens[:, None]).squeeze(-1)
        assert (logp - want).abs().max() < 1e-4


def test_an_encoder_decoder_model_falls_back_to_generate(tiny_tokenizer):
    from transformers import T5Config, T5ForConditionalGeneration

    t5 = T5ForConditionalGeneration(
        T5Config(vocab_size=len(tiny_tokenizer), d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8)
    )
    assert not supports_lean_decode(t5)


def test_an_unknown_engine_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown rollout engine 'sglang'; valid: transformers, vllm"):
        engine_class("sglang")


def test_an_engine_whose_module_is_missing_says_so(monkeypatch):
    def ghost():
        from trainers.rollout.engines.ghost_engine import GhostEngine  # no such module

        return GhostEngine

    monkeypatch.setitem(ENGINES._entries, "ghost", ghost)  # registered for this test only
    with pytest.raises(EngineUnavailable, match="rollout engine 'ghost' is not available here"):
        engine_class("ghost")


def test_the_transformers_engine_is_registered():
    assert engine_class("transformers") is HFEngine


def spanning_stop(tokenizer, token_ids: list[int], text: str) -> str | None:
    """A 3-character piece of `text` that starts in one token and ends in a later one, where it first occurs."""
    for k in range(1, len(token_ids)):
        head = tokenizer.decode(token_ids[:k], skip_special_tokens=True)
        stop = text[len(head) - 1 : len(head) + 2]
        if len(stop) == 3 and "\ufffd" not in stop and text.find(stop) == len(head) - 1:
            return stop
    return None


def test_a_stop_string_spanning_tokens_ends_greedy_output_where_generate_ends_it(model, tiny_tokenizer, prompts):
    greedy = SamplingParams(max_new_tokens=24, temperature=0)
    plain = [grp[0] for grp in engine(model, tiny_tokenizer, True).generate(prompts, 1, greedy)]
    index, stop = next((i, s) for i, g in enumerate(plain) if (s := spanning_stop(tiny_tokenizer, g.token_ids, g.text)))
    params = SamplingParams(max_new_tokens=24, temperature=0, stop=[stop], logprobs=True)
    [[got]], [[expected]] = (
        engine(model, tiny_tokenizer, lean).generate(prompts[index : index + 1], 1, params) for lean in (True, False)
    )
    assert (got.token_ids, got.text, got.finish_reason) == (expected.token_ids, expected.text, "stop")
    g = plain[index]
    assert len(got.token_ids) < len(g.token_ids) and len(got.logprobs) == len(got.token_ids)
    assert got.text == g.text[: g.text.find(stop)]
