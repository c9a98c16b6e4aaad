import torch

from trainers.models.loading import load_policy, load_reference, trainable_parameters
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
    ids = torch.tensor([[4, 10, 11, 2, 5]], device=policy.device)
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


def _model_with_attention_dropout(tiny_model_path, tmp_path):
    """A copy of the tiny model whose config asks for heavy attention dropout."""
    import json
    import shutil

    folder = tmp_path / "dropout-model"
    shutil.copytree(tiny_model_path, folder)
    config = json.loads((folder / "config.json").read_text())
    config["attention_dropout"] = 0.5
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _two_forward_passes_agree(model) -> bool:
    ids = torch.arange(3, 19, device=model.device).unsqueeze(0)
    with torch.no_grad():  # train mode, as the loop computes old logprobs
        return torch.equal(model(ids).logits, model(ids).logits)


def test_dropout_is_off_by_default_so_the_on_policy_ratio_is_one(tiny_model_path, tmp_path):
    folder = _model_with_attention_dropout(tiny_model_path, tmp_path)
    policy, _ = load_policy(ModelSpec(path=str(folder)))
    assert policy.training and _two_forward_passes_agree(policy)


def test_dropout_stays_when_the_spec_keeps_it(tiny_model_path, tmp_path):
    folder = _model_with_attention_dropout(tiny_model_path, tmp_path)
    policy, _ = load_policy(ModelSpec(path=str(folder), disable_dropout=False))
    assert not _two_forward_passes_agree(policy)


def test_a_missing_model_folder_fails_with_a_plain_message_not_a_hub_id_error(tmp_path):
    import pytest

    from trainers.models.loading import ModelFolderError

    with pytest.raises(ModelFolderError, match=f"^folder {tmp_path / 'gone'} does not exist$"):
        load_policy(ModelSpec(path=str(tmp_path / "gone")))
    with pytest.raises(ModelFolderError, match="has no config.json: not a model folder"):
        load_policy(ModelSpec(path=str(tmp_path)))
