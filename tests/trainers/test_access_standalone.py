"""A run started without the studio (`python -m trainers run`) applies the one path policy itself
(trainers.access.refusals with standalone_policy): a search tool's documents that are a FIFO, a link
into the studio's data folder, or outside STUDIO_DATASET_ROOTS are refused before anything is read, as
the studio refuses them; the same run with an allowed file then trains."""

import json
import os
from pathlib import Path

from trainers.access import refusals, standalone_policy
from trainers.spec import RunSpec, looks_local

from .test_cli import cli, small_config, write_spec

FIELD = "environment.params.tools.0.params.dataset"


def with_search(config: dict, documents: Path) -> dict:
    tools = {"tools": [{"kind": "search", "params": {"dataset": str(documents)}}]}
    return {**config, "environment": {"kind": "tools", "params": tools, "max_turns": 1, "max_turn_tokens": 4}}


def env_for(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    return {**env, "STUDIO_DATA_DIR": str(tmp_path / "var"), **values}


def documents(path: Path) -> Path:
    path.write_text(json.dumps({"title": "t", "text": "the sky is blue"}) + "\n")
    return path


def test_the_policy_refuses_what_the_studio_would(tmp_path, monkeypatch):
    data_dir = tmp_path / "var"
    (data_dir / "demo").mkdir(parents=True)
    secret = data_dir / "secret_key"
    secret.write_text("s3cret")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "docs.jsonl").symlink_to(secret)
    fifo = tmp_path / "docs.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("STUDIO_DATA_DIR", str(data_dir))
    monkeypatch.delenv("STUDIO_DATASET_ROOTS", raising=False)
    base = {"model": {"path": "org/model"}, "data": {"path": str(documents(tmp_path / "rows.jsonl"))},
            "rubric": {"criteria": [{"name": "c", "kind": "exact_match"}]}}  # fmt: skip

    def refused(where: Path) -> str | None:
        spec = RunSpec.model_validate(with_search(base, where))
        return refusals(spec, standalone_policy(), is_local=looks_local).get(FIELD)

    assert "not a regular file or folder" in refused(fifo)
    assert f"docs.jsonl is {secret}, which is inside the studio's data folder" in refused(linked)
    assert refused(documents(data_dir / "demo" / "docs.jsonl")) is None  # the demo folder may be read
    assert refused(documents(tmp_path / "docs.jsonl")) is None
    monkeypatch.setenv("STUDIO_DATASET_ROOTS", str(tmp_path / "elsewhere"))
    assert "outside the folders data may be read from" in refused(tmp_path / "docs.jsonl")


def test_the_cli_refuses_a_fifo_and_a_link_then_runs_the_allowed_file(tiny_model_path, tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_text("s3cret")
    fifo = tmp_path / "docs.fifo"
    os.mkfifo(fifo)
    linked = tmp_path / "linked.jsonl"
    linked.symlink_to(tmp_path / "var" / "secret_key")
    config = small_config(tiny_model_path, tmp_path)
    config["optim"]["total_steps"] = 1
    env = env_for(tmp_path)
    hostile = with_search({**config, "data": {**config["data"], "path": str(linked)}}, fifo)
    done = cli("run", str(write_spec(tmp_path / "spec.yaml", hostile)), "--quiet", env=env)
    assert done.returncode == 2, done.stderr  # bad input: nothing read (a FIFO would have blocked), nothing trained
    assert "refused by the path policy before reading anything" in done.stderr
    assert f"{FIELD}: {fifo}: not a regular file or folder" in done.stderr, done.stderr
    assert "data.path" in done.stderr and "inside the studio's data folder" in done.stderr, done.stderr
    assert not (tmp_path / "out" / "metrics.jsonl").exists()
    allowed = with_search(config, documents(tmp_path / "docs.jsonl"))
    done = cli("run", str(write_spec(tmp_path / "spec.yaml", allowed)), "--quiet", env=env)  # the run trains
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["status"] == "succeeded"
