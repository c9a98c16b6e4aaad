"""trainers.access: the one policy for named paths (resolved file by file) and endpoints, and the
settings fields it finds by their marks."""

from __future__ import annotations

import os

import pytest

from trainers.access import DATA, MODEL, PathPolicy, Refused, endpoint_error, named
from trainers.spec import EnvironmentSpec, RunSpec


@pytest.fixture
def layout(tmp_path):
    root, secret = tmp_path / "root", tmp_path / "root" / "var"
    secret.mkdir(parents=True)
    (secret / "first-login.txt").write_text("password")
    (secret / "mine").mkdir()
    (secret / "mine" / "config.json").write_text("{}")
    mine = secret / "mine"
    policy = PathPolicy(roots=(root,), forbidden={secret: "the data folder"},
                        allowed_inside=lambda path, kind: path == mine or mine in path.parents)  # fmt: skip
    return root, secret, policy


def test_every_file_inside_a_named_folder_is_judged_where_it_really_lies(layout):
    root, secret, policy = layout
    folder = root / "data"
    (folder / "deep" / "er").mkdir(parents=True)
    (folder / "a.jsonl").write_text("{}\n")
    assert policy.check(str(folder), DATA) == folder
    (folder / "deep" / "er" / "b.jsonl").symlink_to(secret / "first-login.txt")
    with pytest.raises(Refused, match=r"deep/er/b\.jsonl is .*inside the data folder"):
        policy.check(str(folder), DATA)
    (folder / "deep" / "er" / "b.jsonl").unlink()
    (folder / "linked").symlink_to(secret)  # a linked folder: refused where it leads
    with pytest.raises(Refused, match="linked is"):
        policy.check(str(folder), MODEL)
    (folder / "linked").unlink()
    (folder / "own").symlink_to(secret / "mine")  # what the caller may read inside the area passes
    assert policy.check(str(folder), MODEL) == folder


def test_data_must_lie_under_a_root_models_may_lie_elsewhere_and_special_files_are_refused(layout, tmp_path):
    root, secret, policy = layout
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    with pytest.raises(Refused, match="outside the folders data may be read from"):
        policy.check(str(outside), DATA)
    assert policy.check(str(outside), MODEL) == outside
    assert policy.error(str(outside / "not-yet"), MODEL) is None  # a model folder the worker makes or downloads
    assert "no such file" in policy.error(str(root / "missing.jsonl"), DATA)
    with pytest.raises(Refused, match="holding"):
        policy.check(str(root), DATA)  # a folder holding the data folder
    os.mkfifo(root / "pipe")
    assert "not a regular file" in policy.error(str(root / "pipe"), DATA)
    assert "inside the data folder" in policy.error(str(root / "x" / ".." / "var" / "first-login.txt"), MODEL)
    assert "inside the data folder" in policy.error("var/first-login.txt", MODEL, base=root)
    assert "not a valid path" in policy.error("a\0b", DATA)


def test_a_walk_is_bounded_and_link_loops_end(layout):
    root, _, policy = layout
    folder = root / "many"
    folder.mkdir()
    (folder / "loop").symlink_to(folder)
    for i in range(5):
        (folder / f"{i}.jsonl").write_text("{}\n")
    assert policy.check(str(folder), DATA) == folder
    small = PathPolicy(roots=policy.roots, forbidden=policy.forbidden, max_files=3)
    assert "more than 3" in small.error(str(folder), DATA)


@pytest.mark.parametrize(("url", "allowed", "ok"), [
    ("http://localhost:8000/v1", ["localhost"], True),
    ("http://[::1]:8000", ["[::1]"], True),
    ("http://LOCALHOST:1", ["localhost"], True),
    ("http://localhost.evil.example/", ["localhost"], False),
    ("http://localhost@evil.example/", ["localhost"], False),
    ("http://vllm:8000", ["vllm:8000"], True),
    ("http://vllm:8001", ["vllm:8000"], False),
    ("https://judge.example/v1", ["https://judge.example"], True),
    ("http://judge.example/v1", ["https://judge.example"], False),
    ("http://anything.example", ["*"], True),
    ("http://localhost", [], False),
    ("file:///etc/passwd", ["*"], False),
    ("http://[bad", ["*"], False),
])  # fmt: skip
def test_endpoints_must_be_on_the_operators_list(url, allowed, ok):
    assert (endpoint_error(url, allowed) is None) is ok


def test_the_settings_name_their_paths_and_endpoints_wherever_they_are():
    spec = RunSpec.model_validate({
        "model": {"path": "/m", "ref_path": "/r"}, "data": {"path": "/d.jsonl"},
        "rubric": {"criteria": [
            {"name": "a", "kind": "llm_judge", "params": {"model": "/judge", "rubric": "r", "backend": "local"}},
            {"name": "b", "kind": "llm_judge", "params": {"model": "gpt", "rubric": "r", "base_url": "http://j/v1"}},
        ]},
        "rollout": {"engine": "vllm", "vllm_server_url": "http://v:1"},
        "checkpoint": {"resume_from": "latest"}, "eval": {"checkpoint": "/c"},
        "validation": {"path": "/val.jsonl"}, "warm_up": {"path": "/cold-start.jsonl"},
        "environment": {"kind": "tools", "params": {"tools": [{"kind": "calculator"},
                                                              {"kind": "search", "params": {"dataset": "/docs"}}]}},
    })  # fmt: skip
    found = {(n.field, n.value, n.kind) for n in named(spec)}
    assert found == {
        ("model.path", "/m", MODEL),
        ("model.ref_path", "/r", MODEL),
        ("data.path", "/d.jsonl", DATA),
        ("rubric.criteria.0.params.model", "/judge", MODEL),
        ("rubric.criteria.1.params.base_url", "http://j/v1", "endpoint"),
        ("rollout.vllm_server_url", "http://v:1", "endpoint"),
        ("eval.checkpoint", "/c", MODEL),
        ("validation.path", "/val.jsonl", DATA),
        ("warm_up.path", "/cold-start.jsonl", DATA),
        ("environment.params.tools.1.params.dataset", "/docs", DATA),
    }  # 'latest' is a word, not a path; a remote judge's model is a name
    environment = EnvironmentSpec.model_validate(spec.environment.model_dump())
    assert [n.field for n in named(environment)] == ["params.tools.1.params.dataset"]
