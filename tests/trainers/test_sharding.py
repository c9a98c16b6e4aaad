"""trainers.scale.sharding in one process: the checks on the parallel settings, the mesh of a single
process, finding decoder layers, FSDP's policies, and the whole copy a sharded run samples from.
Sharding itself needs several processes: test_distributed.py."""

import pytest
import torch
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy
from transformers import AutoModelForCausalLM

from trainers.rollout.engines.vllm_weights import export_weights
from trainers.scale.distributed import DistInfo
from trainers.scale.sharding import (
    ParallelError,
    build_mesh,
    check_parallel,
    copy_weights_into,
    decoder_layers,
    fsdp_policies,
    full_copy,
    is_sharded,
    run_pass,
)
from trainers.spec import ParallelSpec


@pytest.fixture
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


@pytest.fixture
def lora_model(model):
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # fresh LoRA B is zero; make the adapters change the weights
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    return peft_model


def test_a_job_of_as_many_processes_as_the_spec_asks_for_passes():
    check_parallel(ParallelSpec(procs_per_node=2, nodes=2, sharding="hybrid"), DistInfo(world_size=4), cuda=False)
    check_parallel(ParallelSpec(), DistInfo(), cuda=False)


def test_torchrun_with_another_process_count_is_refused_naming_both():
    with pytest.raises(ParallelError, match=r"= 2, but this job is WORLD_SIZE=4"):
        check_parallel(ParallelSpec(procs_per_node=2), DistInfo(rank=1, world_size=4), cuda=False)


def test_a_single_process_is_refused_when_the_spec_asks_for_several():
    with pytest.raises(ParallelError, match="a single process .*python -m trainers run"):
        check_parallel(ParallelSpec(procs_per_node=2), DistInfo(), cuda=False)


def test_cpu_offload_is_refused_without_a_gpu_and_for_a_single_process():
    with pytest.raises(ParallelError, match="no CUDA GPU"):
        check_parallel(ParallelSpec(procs_per_node=2, cpu_offload=True), DistInfo(world_size=2), cuda=False)
    with pytest.raises(ParallelError, match="a single process is not sharded"):
        check_parallel(ParallelSpec(cpu_offload=True), DistInfo(), cuda=True)
    check_parallel(ParallelSpec(procs_per_node=2, cpu_offload=True), DistInfo(world_size=2), cuda=True)


def test_a_single_process_has_no_mesh_and_is_not_sharded(model):
    assert build_mesh(ParallelSpec(), DistInfo()) is None
    assert not is_sharded(model)
    assert run_pass(model, lambda: "ran") == "ran"  # directly: no root unit to go through


def test_the_policies_follow_the_settings():
    bf16 = fsdp_policies(ParallelSpec(procs_per_node=2, mixed_precision="bf16", cpu_offload=True))
    assert (bf16["mp_policy"].param_dtype, bf16["mp_policy"].reduce_dtype) == (torch.bfloat16, torch.float32)
    assert isinstance(bf16["offload_policy"], CPUOffloadPolicy)
    off = fsdp_policies(ParallelSpec(procs_per_node=2))
    assert off["mp_policy"].param_dtype is None  # computed in the model's own dtype
    assert type(off["offload_policy"]) is OffloadPolicy  # no offload


def test_decoder_layers_are_found_by_the_model_s_no_split_classes_under_peft_too(model, lora_model):
    layers = decoder_layers(model)
    assert [type(m).__name__ for m in layers] == ["LlamaDecoderLayer"] * model.config.num_hidden_layers
    assert decoder_layers(lora_model) == layers  # get_peft_model wrapped this same model


def test_the_whole_copy_is_the_merged_policy_and_refreshes_from_its_export(lora_model):
    copy = full_copy(lora_model)
    assert not hasattr(copy, "peft_config")  # a plain model: samples without the adapters' extra work
    assert not any(p.requires_grad for p in copy.parameters())
    expected = {name: t.clone() for name, t in export_weights(lora_model)}
    for name, tensor in copy.state_dict().items():
        torch.testing.assert_close(tensor, expected[name], msg=name)

    with torch.no_grad():  # the policy moves on; the copy does not, until refreshed
        for name, p in lora_model.named_parameters():
            if "lora_A" in name:
                p.add_(0.1)
    moved = {name: t.clone() for name, t in export_weights(lora_model)}
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(copy.state_dict()[q], moved[q])
    assert copy_weights_into(copy, export_weights(lora_model)) == len(moved)
    for name, tensor in copy.state_dict().items():
        torch.testing.assert_close(tensor, moved[name], msg=name)


def test_the_whole_copy_of_a_checkpointed_lora_policy_does_not_checkpoint(lora_model):
    from trainers.models.loading import enable_activation_checkpointing

    enable_activation_checkpointing(lora_model)
    copy = full_copy(lora_model)
    assert lora_model.base_model.model.is_gradient_checkpointing and not copy.is_gradient_checkpointing
    assert not hasattr(copy, "_require_grads_hook")


def test_refreshing_a_copy_that_does_not_match_the_policy_fails_loudly(model):
    with pytest.raises(KeyError):
        copy_weights_into(full_copy(model), [("no.such.weight", torch.zeros(1))])
