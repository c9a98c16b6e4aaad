import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from trainers.tiny import build_tiny_model, count_parameters, synthetic_corpus, train_tokenizer


def test_it_round_trips_token_ids_through_the_auto_classes(tiny_model_path):
    built = train_tokenizer(synthetic_corpus(0))
    loaded = AutoTokenizer.from_pretrained(tiny_model_path)
    text = "Repeat the letter: k\nkk kkk 12 + 30 = 42 ✓ 中文"
    assert type(loaded) is PreTrainedTokenizerFast
    assert loaded(text).input_ids == built(text).input_ids
    assert loaded.decode(loaded(text).input_ids) == text
    assert (loaded.bos_token, loaded.eos_token, loaded.pad_token) == ("<|bos|>", "<|eos|>", "<|pad|>")


def test_its_chat_template_opens_an_assistant_turn(tiny_tokenizer):
    text = tiny_tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "<|system|>Be brief.<|eos|><|user|>hi<|eos|><|assistant|>"


def test_the_model_loads_with_the_tokenizer_ids(tiny_model_path, tiny_tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    assert model.config.model_type == "llama"
    assert model.config.vocab_size == len(tiny_tokenizer)
    assert model.config.eos_token_id == tiny_tokenizer.eos_token_id
    assert model.config.pad_token_id == tiny_tokenizer.pad_token_id
    assert 500_000 < count_parameters(model) < 5_000_000


def test_the_same_seed_builds_the_same_weights(tmp_path, tiny_model_path):
    again = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "again", seed=0))
    other = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "other", seed=1))
    first = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    w = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(first.state_dict()[w], again.state_dict()[w])
    assert not torch.equal(first.state_dict()[w], other.state_dict()[w])


def test_the_small_size_has_10_to_20_million_parameters(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path, size="small"))
    assert 10_000_000 <= count_parameters(model) <= 20_000_000
