"""rollout.asynchronous and algorithm.correction: defaults, what they refuse (by field), and what they resolve to."""

import pytest
from pydantic import ValidationError

from trainers.spec import RunSpec, validation_errors

BASE = {
    "model": {"path": "var/tiny"},
    "data": {"path": "data.jsonl"},
    "rubric": {"criteria": [{"name": "correct", "kind": "exact_match"}]},
}
ASYNC = {"mode": "async", "max_staleness": 2}


def spec_with(**sections) -> RunSpec:
    return RunSpec.model_validate({**BASE, **sections})


def errors_of(**sections) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        spec_with(**sections)
    return validation_errors(info.value)


def test_runs_are_synchronous_unless_asked_and_max_staleness_0_is_synchronous():
    assert not spec_with().rollout.asynchronous.runs_ahead
    assert spec_with(rollout={"asynchronous": ASYNC}).rollout.asynchronous.runs_ahead
    lockstep = {"mode": "async", "max_staleness": 0}
    assert not spec_with(rollout={"asynchronous": lockstep}).rollout.asynchronous.runs_ahead


@pytest.mark.parametrize("vllm", [{}, {"vllm_server_url": "http://localhost:8000"}], ids=["colocated", "server"])
def test_vllm_runs_ahead_with_whole_completions(vllm):
    spec = spec_with(rollout={"engine": "vllm", "asynchronous": ASYNC, **vllm})
    assert spec.rollout.asynchronous.runs_ahead and not spec.rollout.asynchronous.partial_rollouts


@pytest.mark.parametrize(
    ("sections", "field", "says"),
    [
        ({"rollout": {"engine": "vllm", "asynchronous": {**ASYNC, "partial_rollouts": True}}},
         "rollout.asynchronous.partial_rollouts", "whole completions"),
        ({"rollout": {"asynchronous": ASYNC}, "parallel": {"procs_per_node": 2}}, "rollout.asynchronous.mode", "one process"),
        ({"rollout": {"asynchronous": ASYNC}, "curriculum": {"hints": True}, "data": {"path": "d.jsonl", "answer_field": "answer"}},
         "curriculum.hints", "mode sync"),
        ({"rollout": {"asynchronous": {**ASYNC, "partial_rollouts": True}, "stop": ["\n"]}},
         "rollout.asynchronous.partial_rollouts", "stop string"),
        ({"rollout": {"asynchronous": {"over_provision": 1.5}}}, "rollout.asynchronous.over_provision", "partial_rollouts"),
    ],
    ids=["partial with vllm", "several processes", "hints", "partial with stop strings", "over-provisioning alone"],
)  # fmt: skip
def test_it_refuses_what_the_pipeline_cannot_run_under_the_field_to_change(sections, field, says):
    errs = errors_of(**sections)
    assert list(errs) == [field] and says in errs[field]


def test_a_correction_resolves_with_its_band_and_tis_cap_is_token_tis():
    algo = spec_with(algorithm={"correction": "icepop", "correction_low": 0.4, "correction_high": 3.0}).algorithm
    assert (algo.off_policy.name, algo.off_policy.low, algo.off_policy.high) == ("icepop", 0.4, 3.0)
    legacy = spec_with(algorithm={"tis_cap": 2.5}).algorithm.off_policy
    assert (legacy.name, legacy.high) == ("tis", 2.5)
    assert spec_with().algorithm.off_policy is None


def test_it_refuses_an_unknown_correction_and_tis_cap_beside_a_correction():
    errs = errors_of(algorithm={"correction": "ppo"})
    assert "decoupled" in errs["algorithm.correction"]
    errs = errors_of(algorithm={"correction": "tis", "tis_cap": 2.0})
    assert list(errs) == ["algorithm.tis_cap"]
