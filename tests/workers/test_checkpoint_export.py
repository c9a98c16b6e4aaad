"""A checkpoint exported as a Hugging Face folder (workers.export_checkpoint, called here as the worker
calls it): a LoRA checkpoint merged into plain weights that give the adapter model's logits, or kept
as an adapter folder peft loads; into a new folder under the allowed roots, or a zip to download;
refusals named (a folder already there or outside the roots, an adapter asked of full weights)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch
from django.test import override_settings

from studio.runs.models import Checkpoint, Run
from studio.serving.exports import target_error
from tests.studio.people import the_team
from workers.serving.task import export_checkpoint

LORA = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}


@pytest.fixture
def data_dir(tmp_path):
    with override_settings(DATA_DIR=tmp_path / "data", DATASET_ROOTS=[tmp_path / "data", tmp_path / "out"]):
        (tmp_path / "out").mkdir()
        yield tmp_path


@pytest.fixture
def lora_run(db, data_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.demos.tiny import build_tiny_model

    base = build_tiny_model(data_dir / "data" / "demo" / "tiny")
    run = Run.objects.create(team=the_team(), name="lora", spec={"model": {"path": str(base), "lora": LORA}})
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=4, lora_alpha=8,
                                                                                  target_modules=["q_proj", "v_proj"]))  # fmt: skip
    with torch.no_grad():  # adapters that change the output (peft starts B at zero)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    checkpoint = data_dir / "data" / "runs" / str(run.pk) / "step-2"
    model.save_pretrained(checkpoint)
    AutoTokenizer.from_pretrained(base).save_pretrained(checkpoint)  # as the trainer's checkpoints hold it
    Checkpoint.objects.create(run=run, step=2, path=str(checkpoint))
    return run, model.eval()


def test_merged_gives_the_adapter_models_logits_and_adapter_stays_an_adapter(lora_run, data_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run, adapted = lora_run
    ids = torch.tensor([[1, 5, 9, 14, 3]])
    merged = export_checkpoint(run.pk, 2, "merged", str(data_dir / "out" / "merged"))
    assert merged["kind"] == "merged" and "model.safetensors" in merged["files"] and "tokenizer.json" in merged["files"]
    plain = AutoModelForCausalLM.from_pretrained(merged["folder"]).eval()
    with torch.no_grad():
        torch.testing.assert_close(plain(ids).logits, adapted(ids).logits, rtol=1e-4, atol=1e-4)
    adapter = export_checkpoint(run.pk, 2, "adapter", str(data_dir / "out" / "adapter"))
    assert adapter["kind"] == "adapter" and "adapter_config.json" in adapter["files"]
    base = AutoModelForCausalLM.from_pretrained(run.spec["model"]["path"])
    with torch.no_grad():
        again = PeftModel.from_pretrained(base, adapter["folder"]).eval()(ids).logits
        torch.testing.assert_close(again, adapted(ids).logits, rtol=1e-4, atol=1e-4)


def test_without_a_folder_it_is_a_zip_to_download(lora_run, data_dir):
    run, _ = lora_run
    answer = export_checkpoint(run.pk, 2, "merged")
    assert Path(answer["zip"]).parent == data_dir / "data" / "exports" / str(run.pk)
    names = zipfile.ZipFile(answer["zip"]).namelist()
    assert "step-2-merged/config.json" in names and "step-2-merged/model.safetensors" in names


def test_refusals_are_named_and_write_nothing(lora_run, data_dir):
    run, _ = lora_run
    taken = data_dir / "out" / "taken"
    taken.mkdir()
    assert "already exists" in export_checkpoint(run.pk, 2, "merged", str(taken))["error"]
    outside = data_dir / "elsewhere"
    outside.mkdir()
    assert export_checkpoint(run.pk, 2, "merged", str(outside / "m"))["error"].startswith("folder: ")
    assert export_checkpoint(run.pk, 9, "merged")["error"] == "step: no such checkpoint"
    assert not (outside / "m").exists()
    assert "absolute" in target_error("relative/folder", run.team)
    secret = data_dir / "data" / "secrets-here"
    assert target_error(str(secret), run.team)  # the studio's data folder: not the team's to write


def test_an_adapter_is_not_made_of_full_weights(db, data_dir):
    from trainers.demos.tiny import build_tiny_model

    base = build_tiny_model(data_dir / "data" / "demo" / "full")
    run = Run.objects.create(team=the_team(), name="full", spec={"model": {"path": str(base)}})
    Checkpoint.objects.create(run=run, step=1, path=str(base))
    answer = export_checkpoint(run.pk, 1, "adapter", str(data_dir / "out" / "a"))
    assert "full weights" in answer["error"]
    assert export_checkpoint(run.pk, 1, "merged", str(data_dir / "out" / "f"))["kind"] == "full"
