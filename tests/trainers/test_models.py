import torch

from trainers.models import load_policy, load_reference, trainable_parameters
from trainers.spec import LoraSpec, ModelSpec


def test_no_reference_is_loaded_without_kl(tiny_model_path):
    spec = ModelSpec(path=str(tiny_model_path))
    policy, _ = load_policy(spec)
    assert load_reference(spec, policy, kl_beta=0.0) is None


def test_the_reference_is_a_frozen_copy_of_the_initial_policy(tiny_model_path):
    spec = ModelSpec(path=str(tiny_model_path))
    policy, _ = load_policy(spec)
    ref = load_reference(spec, policy, kl_beta=0.1)
    assert ref.model is not policy and not ref.adapters_off
    assert not any(p.requires_grad for p in ref.model.parameters())
    with torch.no_grad():
        next(policy.parameters()).add_(1.0)  # training the policy must not move the reference
    assert not torch.equal(next(policy.parameters()), next(ref.model.parameters()))


def test_with_lora_only_adapters_train_and_the_reference_is_the_base(tiny_model_path):
    spec = ModelSpec(path=str(tiny_model_path), lora=LoraSpec(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    policy, _ = load_policy(spec)
    names = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    ref = load_reference(spec, policy, kl_beta=0.1)
    assert ref.model is policy and ref.adapters_off
    ids = torch.tensor([[4, 10, 11, 2, 5]])
    for p in trainable_parameters(policy):  # make the adapters matter
        torch.nn.init.normal_(p, std=0.5)
    initial, _ = load_policy(ModelSpec(path=str(tiny_model_path)))
    with torch.no_grad():
        adapted = policy(ids).logits
        with ref.context():
            base = policy(ids).logits
        expected = initial(ids).logits
    assert not torch.allclose(adapted, base)
    assert torch.allclose(base, expected, atol=1e-6)


def test_gradient_checkpointing_is_switched_on_when_asked(tiny_model_path):
    policy, tokenizer = load_policy(ModelSpec(path=str(tiny_model_path), gradient_checkpointing=True))
    assert policy.is_gradient_checkpointing and policy.training
    assert tokenizer.pad_token_id is not None
