"""The verifiers kind against the real verifiers 0.4.0, installed into a virtual environment of its own
(`verifiers_packages`: made once, kept across sessions), with small tasksets written in the tests:
its tasks become the run's prompts, its reward functions the rubric's criteria with the package's
weights, the tiny model trains on it; a hostile taskset is contained as Python environments are
(no host file, no network, limits on time and memory, what comes back checked), and what the
studio drives not (an Env with agents of its own) is refused in words.

Slow: the first session installs verifiers (minutes; seconds once kept), and each sandboxed process
imports it (8 s of CPU)."""

import importlib.util
import os
import time
from pathlib import Path

import pytest

from tests.trainers.helpers import stepped, tiny_spec
from tests.trainers.rollout.environments import verifiers_packages as packages
from trainers.report import MemoryReporter
from trainers.rollout.environments.catalog import VerifiersParams
from trainers.rollout.environments.packages import venvs
from trainers.rollout.environments.packages.prepare import prepared
from trainers.rollout.environments.packages.verifiers_host import VerifiersError, VerifiersHost, host_for
from trainers.run.evaluate import evaluate
from trainers.run.loop import train
from trainers.sandbox.process import _project_root, isolation
from trainers.spec import RunSpec

pytestmark = pytest.mark.slow
needs_bubblewrap = pytest.mark.skipif(isolation() != "bubblewrap", reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def package():
    started = time.monotonic()
    found = packages.install(packages.shared_root())
    print(f"verifiers environment ready in {time.monotonic() - started:.1f} s (installed in {found.install_s} s)")
    return found


@pytest.fixture
def operator(monkeypatch):
    """The worker's environment as the operator set it for the test packages."""
    for key, value in packages.environment_variables(packages.shared_root()).items():
        monkeypatch.setenv(key, value)


def params(module: str, **extra) -> VerifiersParams:
    return VerifiersParams(package=packages.NAME, version=packages.VERSION, taskset=module, **extra)


@pytest.fixture(scope="module")
def hostile(package):
    host = VerifiersHost(params("hostile_tasks", score_timeout_s=4, memory_mb=1024), package)
    yield host
    host.close()


def test_the_package_lives_in_an_environment_of_its_own(package):
    assert package.folder.parent == packages.shared_root() / "envs"
    assert (package.verifiers, package.version) == ("0.4.0", "1.0")
    assert list(package.folder.glob("lib/python*/site-packages/verifiers-0.4.0.dist-info"))
    assert importlib.util.find_spec("verifiers") is None  # the studio's own environment never gets it
    assert package.provenance() == {"package": packages.NAME, "version": "1.0", "verifiers": "0.4.0"}


def test_a_package_off_the_operator_s_list_is_refused_before_anything_is_installed(monkeypatch, tmp_path):
    monkeypatch.setenv("ROLLOUT_ENV_PACKAGES_DIR", str(tmp_path))
    monkeypatch.setenv("ROLLOUT_ENV_PACKAGES_ALLOWED", "reverse-text, Wordle")
    with pytest.raises(venvs.PackageInstallError, match="not on the operator's list.*reverse-text, wordle"):
        venvs.ensure_installed("evil-env", "1.0")
    assert not list(tmp_path.iterdir())


def test_a_run_whose_package_cannot_be_installed_fails_saying_pip_s_reason(monkeypatch, tmp_path, tiny_model_path):
    monkeypatch.setenv("ROLLOUT_ENV_PACKAGES_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("ROLLOUT_ENV_PIP_INDEX", (tmp_path / "empty-index").as_uri())
    (tmp_path / "empty-index").mkdir()
    spec = verifiers_spec(tiny_model_path, tmp_path, package="rollout-no-such-taskset", version="9.9")
    reporter = MemoryReporter()
    with pytest.raises(venvs.PackageInstallError):
        train(spec, reporter)
    state, detail = reporter.states[-1]
    assert state == "failed"
    assert "pip could not install rollout-no-such-taskset==9.9" in detail
    assert "No matching distribution found for rollout-no-such-taskset==9.9" in detail
    assert [p.name for p in (tmp_path / "envs").iterdir() if not p.name.startswith(".")] == []  # nothing half-made


def test_the_tasks_are_the_prompts_and_each_reward_a_criterion(package, operator, tiny_model_path, tmp_path):
    spec = verifiers_spec(tiny_model_path, tmp_path)
    ready = prepared(spec)
    rows = Path(ready.data.path).read_text().splitlines()
    assert len(rows) == 4 and '"Say the digit 2."' in rows[2] and '"answer": "2"' in rows[2]
    assert ready.data.messages_field == "messages" and "verifiers_task" in ready.data.extra_fields
    criteria = [(c.name, c.weight, c.params["function"]) for c in ready.rubric.criteria]
    # The package's weights times the criterion's (2), in its order (by name); the metric is shown, weighted 0.
    assert criteria == [("brief", 1.0, "brief"), ("says_digit", 2.0, "says_digit"), ("reply_chars", 0.0, "reply_chars")]


def test_the_tiny_model_trains_on_a_verifiers_taskset(package, operator, tiny_model_path, tmp_path):
    reporter = MemoryReporter()
    ready = prepared(verifiers_spec(tiny_model_path, tmp_path))
    started = time.monotonic()
    stepped(ready, reporter, steps=2, update=True)
    print(f"2 steps on the verifiers taskset: {time.monotonic() - started:.1f} s")
    assert len(reporter.series("reward/says_digit/mean")) == 2
    rollouts = [r for _, batch in reporter.rollout_batches for r in batch]
    assert len(rollouts) == 2 * 2 * 4
    for rollout in rollouts:
        scores = rollout.scores
        assert set(scores) == {"says_digit", "brief", "reply_chars"}
        assert not any(s.error for s in scores.values()), scores
        text = rollout.completion if isinstance(rollout.completion, str) else rollout.completion[-1]["content"]
        assert scores["reply_chars"].score == len(text.strip())  # the package's own metric, on this reply
        assert scores["brief"].score == (1.0 if len(text.strip()) <= 8 else 0.0)
        assert rollout.reward == pytest.approx(2 * scores["says_digit"].score + scores["brief"].score)


def test_an_evaluation_scores_the_taskset_with_the_same_criteria(package, operator, tiny_model_path, tmp_path):
    config = verifiers_spec(tiny_model_path, tmp_path).model_dump(mode="json")
    config["eval"] = {"num_prompts": 2, "samples_per_prompt": 2}
    reporter = MemoryReporter()
    evaluate(RunSpec.model_validate(config), reporter)
    assert reporter.states[-1][0] == "succeeded", reporter.states
    keys = {key for _, values in reporter.metric_points for key in values}
    assert {"eval/reward/says_digit/mean", "eval/reward/reply_chars/mean"} <= keys, sorted(keys)


def test_an_environment_with_agents_of_its_own_is_refused_in_words(package):
    host = VerifiersHost(params("agent_talk"), package)
    try:
        with pytest.raises(VerifiersError, match=r"exports its own Env \(TalkEnv\), whose agents call models"):
            host.describe()
    finally:
        host.close()


def test_a_run_without_a_verifiers_environment_cannot_ask_for_its_tasks(tiny_model_path, tmp_path):
    config = verifiers_spec(tiny_model_path, tmp_path).model_dump(mode="json")
    config["environment"] = None
    with pytest.raises(ValueError, match="need a verifiers environment"):
        prepared(RunSpec.model_validate(config))


# ------------------------------------------------------------------ hostile


@needs_bubblewrap
def test_hostile_rewards_see_no_host_file_no_network_and_no_memory(hostile, tmp_path):
    secret = packages.shared_root() / "secret.txt"  # beside the packages' folder, as the studio's data is
    secret.write_text("do not leak")
    host_passwd = len(Path("/etc/passwd").read_text())
    replies = ["fine", "reads:/etc/passwd", f"reads:{secret}", f"lists:{packages.shared_root()}",
               f"reads:{_project_root()}/manage.py", "network", "allocates", "nan"]  # fmt: skip
    verdicts = hostile.score([(0, reply) for reply in replies])
    fine, passwd, data, listing, studio, network, memory, nan = verdicts
    assert fine.rewards == {"misbehaves": (1.0, 1.0)}
    assert passwd.rewards["misbehaves"][0] != host_passwd  # the sandbox's one-line passwd, not the host's
    assert passwd.rewards["misbehaves"][0] < 100
    assert "FileNotFoundError" in data.error
    assert listing.rewards["misbehaves"][0] == 1.0  # only the package's own folder is in view: envs/
    assert "FileNotFoundError" in studio.error
    assert "PermissionError: network access is disabled" in network.error
    assert "MemoryError" in memory.error
    assert "not a finite number" in nan.error


def test_a_reward_that_loops_times_out_and_the_next_batch_is_scored(hostile):
    (looped,) = hostile.score([(0, "loops")])
    assert "timed out after 4 s" in looped.error
    (fine,) = hostile.score([(0, "fine")])  # a fresh process (the import again: seconds)
    assert fine.rewards == {"misbehaves": (1.0, 1.0)}


def test_a_huge_prompt_is_cut_before_it_crosses(hostile):
    rows = hostile.rows()
    huge = rows[1]["messages"][0]["content"]
    assert len(huge) <= 20_000 and "[truncated:" in huge
    assert rows[0]["messages"] == [{"role": "user", "content": "Say hi."}]


def test_a_process_that_dies_scores_its_batch_zero_with_the_reason(hostile):
    (died,) = hostile.score([(0, "exits")])
    assert "the sandbox process died: exited with code 3" in died.error


def verifiers_spec(model_path, tmp_path, **environment) -> RunSpec:
    config = tiny_spec(model_path, tmp_path, optim={"total_steps": 2}).model_dump(mode="json")
    config["data"] = {"environment_dataset": True, "max_prompt_tokens": 64}
    config["environment"] = {"kind": "verifiers", "max_turns": 1, "params": {
        "package": packages.NAME, "version": packages.VERSION, "taskset": "tiny_echo", **environment}}  # fmt: skip
    config["rubric"] = {"criteria": [{"name": "echo", "kind": "verifiers", "weight": 2.0}]}
    return RunSpec.model_validate(config)


def test_the_host_is_shared_by_a_run_s_preparation_and_its_criteria(package, operator):
    first = host_for(params("tiny_echo"))
    assert host_for(params("tiny_echo")) is first
    assert os.path.samefile(first.package.python, package.python)
