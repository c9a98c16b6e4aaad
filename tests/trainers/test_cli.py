"""The CLI as a user runs it: `python -m trainers ...` in a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from trainers.demos.demo import demo_spec, make_demo_dataset

from .helpers import job_env

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainers", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env or os.environ,
    )


def write_spec(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def small_config(model: Path, tmp_path: Path) -> dict:
    data = make_demo_dataset(tmp_path / "letters.jsonl")
    return demo_spec(
        model,
        data,
        tmp_path / "out",
        optim={"total_steps": 2, "prompts_per_step": 2},
        algorithm={"group_size": 4},
        rollout={"max_new_tokens": 4},
        eval={"samples_per_prompt": 2, "num_prompts": 2},
    )


def test_run_writes_metrics_and_rollouts_jsonl(tiny_model_path, tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", small_config(tiny_model_path, tmp_path))
    done = cli("run", str(spec), "--quiet")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "succeeded" and summary["steps"] == 2
    metrics = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and "reward/mean" in metrics[0]
    rollouts = [json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 2 * 2 * 4
    assert {"prompt", "completion", "reward", "scores", "advantage", "finish_reason"} <= set(rollouts[0])
    assert "status: succeeded" in (tmp_path / "out" / "run.log").read_text()
    assert (tmp_path / "out" / "checkpoints" / "step-2").is_dir()

    done = cli("eval", str(spec), "--checkpoint", summary["checkpoint"])
    assert done.returncode == 0, done.stderr
    assert "eval/pass@2" in json.loads(done.stdout.strip().splitlines()[-1])
    assert len((tmp_path / "out" / "eval_rollouts.jsonl").read_text().splitlines()) == 4


def test_an_invalid_spec_names_each_bad_field(tiny_model_path, tmp_path):
    config = small_config(tiny_model_path, tmp_path)
    config["algorithm"]["clip_ratio_low"] = -1
    config["optim"]["lr"] = "fast"
    done = cli("run", str(write_spec(tmp_path / "spec.yaml", config)))
    assert done.returncode == 2
    assert "spec.yaml: invalid spec:" in done.stderr
    assert "algorithm.clip_ratio_low: Input should be greater than or equal to 0" in done.stderr
    assert "optim.lr:" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_data_field_is_a_clear_error(tiny_model_path, tmp_path):
    config = small_config(tiny_model_path, tmp_path)
    config["data"]["prompt_field"] = "question"
    done = cli("run", str(write_spec(tmp_path / "spec.yaml", config)), "--quiet")
    assert done.returncode == 2
    assert "error: letters.jsonl row 1: field 'question' is missing; available fields: prompt, answer" in done.stderr


def test_score_prints_a_table_or_jsonl(tmp_path):
    rubric = {
        "criteria": [
            {"name": "exact", "kind": "exact_match"},
            {"name": "short", "kind": "length", "params": {"unit": "words", "target_max": 2}},
        ],
        "pass_threshold": 2,
    }
    (tmp_path / "rubric.yaml").write_text(yaml.safe_dump(rubric))
    pairs = [
        {"prompt": "2+2?", "completion": "4", "answer": "4"},
        {"prompt": "2+2?", "completion": "it is five", "answer": "4"},
    ]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    table = cli("score", str(tmp_path / "rubric.yaml"), str(tmp_path / "pairs.jsonl"))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["#", "reward", "passed", "exact", "short"]
    assert lines[1].split() == ["0", "2", "yes", "1", "1"]
    assert lines[2].split()[:4] == ["1", "0.99", "no", "0"]

    rows = cli("score", str(tmp_path / "rubric.yaml"), str(tmp_path / "pairs.jsonl"), "--jsonl")
    results = [json.loads(line) for line in rows.stdout.splitlines()]
    assert [r["reward"] for r in results] == [2.0, 0.99]
    assert results[1]["scores"]["exact"]["explanation"]


def test_score_names_a_bad_pair(tmp_path):
    (tmp_path / "rubric.yaml").write_text(yaml.safe_dump({"criteria": [{"name": "exact", "kind": "exact_match"}]}))
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"prompt": "p"}) + "\n")
    done = cli("score", str(tmp_path / "rubric.yaml"), str(tmp_path / "pairs.jsonl"))
    assert done.returncode == 2
    assert "pair 0: missing field 'completion'" in done.stderr


def test_tiny_builds_a_loadable_model(tmp_path):
    done = cli("tiny", str(tmp_path / "m"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "m" / "config.json").exists() and (tmp_path / "m" / "tokenizer.json").exists()


def launched(monkeypatch, argv: list[str]) -> list[tuple[list[str], int]]:
    """What `python -m trainers <argv>` hands torchrun (argv, processes), run in this process."""
    import trainers.scale.distributed
    from trainers.cli import main

    calls: list[tuple[list[str], int]] = []
    monkeypatch.setattr(
        trainers.scale.distributed, "launch", lambda args, nproc: calls.append((list(args), nproc)) or 0
    )
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(argv) == 0
    return calls


def test_run_launches_torchrun_with_the_spec_s_processes_per_node(monkeypatch, tiny_model_path, tmp_path):
    config = small_config(tiny_model_path, tmp_path) | {"parallel": {"procs_per_node": 2}}
    spec = str(write_spec(tmp_path / "spec.yaml", config))
    assert launched(monkeypatch, ["run", spec, "--quiet"]) == [(["run", spec, "--quiet"], 2)]
    # --procs-per-node overrides it, and the children get the same arguments (so the same override)
    argv = ["run", spec, "--procs-per-node", "3"]
    assert launched(monkeypatch, argv) == [(argv, 3)]


def test_run_refuses_a_spec_spanning_several_nodes(tiny_model_path, tmp_path):
    config = small_config(tiny_model_path, tmp_path) | {"parallel": {"procs_per_node": 2, "nodes": 2}}
    done = cli("run", str(write_spec(tmp_path / "spec.yaml", config)), "--quiet")
    assert done.returncode == 2
    assert "parallel.nodes is 2" in done.stderr and "Ray" in done.stderr


def test_run_with_two_procs_per_node_trains_on_two_processes(tiny_model_path, tmp_path):
    """`--procs-per-node 2`: torchrun's two processes train the model sharded between them; rank 0 writes the
    metrics and the checkpoint and prints the whole summary, and the other process a line with its rank. The
    run is made with Python's stdout unbuffered (as CI may have it), where print() writes a line's text and its
    newline apart and two processes' lines could run together."""
    spec = write_spec(tmp_path / "spec.yaml", small_config(tiny_model_path, tmp_path))
    done = cli("run", str(spec), "--quiet", "--procs-per-node", "2", env=job_env(PYTHONUNBUFFERED="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    summaries = {s["rank"]: s for s in (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))}
    assert sorted(summaries) == [0, 1]
    assert [summaries[rank]["status"] for rank in (0, 1)] == ["succeeded", "succeeded"]
    assert "timing/step_s" in summaries[0] and "timing/step_s" not in summaries[1]
    metrics = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert (tmp_path / "out" / "checkpoints" / "step-2").is_dir()
