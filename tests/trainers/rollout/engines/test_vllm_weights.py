import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.rollout.engines.vllm_weights import (
    chunked,
    decode_weights,
    encode_weights,
    export_weights,
    gathered_weights,
    hf_name,
)


@pytest.fixture
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


@pytest.fixture
def lora_model(model):
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # fresh LoRA B is zero (a no-op); make the adapters change the weights
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    return peft_model


def test_a_plain_model_exports_its_checkpoint_names_and_values(model):
    exported = dict(export_weights(model))
    expected = model.state_dict()
    assert exported.keys() == expected.keys()
    for name, tensor in exported.items():
        assert torch.equal(tensor, expected[name])


def test_a_ddp_style_wrapper_is_unwrapped(model):
    class Wrapper(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert dict(export_weights(Wrapper(model))).keys() == model.state_dict().keys()


def test_a_lora_model_exports_merged_weights_under_the_base_names(lora_model):
    expected = copy.deepcopy(lora_model).merge_and_unload().state_dict()
    exported = {name: t.clone() for name, t in export_weights(lora_model)}
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(exported[name], tensor)
    base = lora_model.get_base_model()
    merged_q = exported["model.layers.0.self_attn.q_proj.weight"]
    assert not torch.allclose(merged_q, base.model.layers[0].self_attn.q_proj.base_layer.weight)


def test_the_gathering_export_merges_lora_as_peft_does(lora_model):
    """The export a sharded model takes (tensor by tensor, adapters merged by the layer's formula,
    since peft's in-place merge cannot run on shards) gives peft's own merge, in the same order;
    on an unsharded model there is nothing to gather, which is how it is checked here."""
    expected = [(name, t.clone()) for name, t in export_weights(lora_model)]
    gathered = list(gathered_weights(lora_model))
    assert [name for name, _ in gathered] == [name for name, _ in expected]
    for (name, tensor), (_, want) in zip(gathered, expected, strict=True):
        torch.testing.assert_close(tensor, want, msg=name)


def test_the_gathering_export_of_a_plain_model_is_its_state_dict(model):
    assert [(n, t.data_ptr()) for n, t in gathered_weights(model)] == [
        (n, t.data_ptr()) for n, t in model.state_dict().items()
    ]


def test_exporting_leaves_the_lora_model_as_it_was(lora_model, tiny_tokenizer):
    ids = torch.tensor([tiny_tokenizer.encode("What is 2 + 2?")])
    before = lora_model(input_ids=ids).logits
    list(export_weights(lora_model))
    after = lora_model(input_ids=ids).logits
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)
    assert any("lora_A" in n for n, _ in lora_model.named_parameters())


@pytest.mark.parametrize(
    ("peft_name", "expected"),
    [
        (
            "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
            "model.layers.0.self_attn.q_proj.weight",
        ),
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", None),
        ("base_model.model.lm_head.modules_to_save.default.weight", "lm_head.weight"),
        ("base_model.model.lm_head.original_module.weight", None),
        ("base_model.model.model.norm.weight", "model.norm.weight"),
    ],
)
def test_peft_names_map_to_checkpoint_names(peft_name, expected):
    assert hf_name(peft_name) == expected


def test_chunks_stay_under_the_byte_budget_and_keep_every_tensor():
    weights = [(f"w{i}", torch.zeros(10)) for i in range(7)]  # 40 bytes each
    chunks = list(chunked(weights, max_bytes=100))
    assert [list(c) for c in chunks] == [["w0", "w1"], ["w2", "w3"], ["w4", "w5"], ["w6"]]


def test_a_tensor_bigger_than_the_budget_travels_alone():
    chunks = list(chunked([("small", torch.zeros(1)), ("big", torch.zeros(100)), ("tail", torch.zeros(1))], 16))
    assert [list(c) for c in chunks] == [["small"], ["big"], ["tail"]]


def test_encoded_weights_decode_to_equal_tensors_even_when_tied(model):
    tensors = dict(export_weights(model))  # embed_tokens and lm_head share storage (tied)
    decoded = decode_weights(encode_weights(tensors))
    assert decoded.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert torch.equal(decoded[name], tensor)
        assert decoded[name].dtype == tensor.dtype
