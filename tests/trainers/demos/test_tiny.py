import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from trainers.demos.tiny import build_tiny_model, count_parameters, synthetic_corpus, train_tokenizer


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


def test_the_default_tiny_model_is_the_one_built_before_the_agent_options(tiny_model_path):
    """Digests of the default build (seed 0) taken before `agent_corpus` and `added_tokens` existed:
    the demo, the learning test and saved runs keep their model."""
    import hashlib
    import json

    saved = json.loads((tiny_model_path / "tokenizer.json").read_text())
    vocab = json.dumps([saved["model"]["vocab"], saved["model"]["merges"], saved["added_tokens"]], sort_keys=True)
    assert hashlib.sha256(vocab.encode()).hexdigest() == (
        "8daec7ee349e8a9febf35fdfa7d1844ae1567bc9828fa2e3262415d24209e33d"
    )
    weights = AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()
    digest = hashlib.sha256(b"".join(weights[k].numpy().tobytes() for k in sorted(weights))).hexdigest()
    assert digest == "d38d07e92c16a0cf54f8be4c881ff670855f67e5bf8f64a314c813f8057ed610"


def test_an_agent_tokenizer_keeps_tool_markers_whole_and_in_decoded_text(tmp_path):
    from trainers.demos.tiny import TOOL_TOKENS, agent_corpus

    path = build_tiny_model(tmp_path, corpus=synthetic_corpus(0) + agent_corpus(0), added_tokens=TOOL_TOKENS)
    tok = AutoTokenizer.from_pretrained(path)
    assert len(tok) == 768 + len(TOOL_TOKENS)
    call = '<tool_call>{"name": "open", "arguments": {"box": "k7"}}</tool_call>'
    ids = tok(call, add_special_tokens=False).input_ids
    assert ids[0] == tok.convert_tokens_to_ids("<tool_call>") and ids[-1] == tok.convert_tokens_to_ids("</tool_call>")
    assert len(ids) < 25  # the call's fixed parts are merged: the tiny model has few tokens to learn
    # The engines decode with skip_special_tokens=True; the parser must still see the markers.
    assert tok.decode(ids, skip_special_tokens=True) == call
    text = tok.apply_chat_template([{"role": "tool", "content": "4821"}], tokenize=False)
    assert tok(text, add_special_tokens=False).input_ids[0] == tok.convert_tokens_to_ids("<|tool|>")


def test_building_prints_nothing_and_leaves_transformers_output_as_it_was(tmp_path, capfd):
    """The first start builds this model: transformers' "Writing model shards" bar and logs stay off
    its output (issue 27), and are back on after the build."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    build_tiny_model(tmp_path / "quiet", hidden=32, layers=1, heads=2, intermediate=64)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == level
