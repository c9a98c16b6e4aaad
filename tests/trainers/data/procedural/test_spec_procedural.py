"""data.procedural in the RunSpec: what it accepts and how it refuses, each error under its field."""

import pytest
from pydantic import ValidationError

from trainers.data.procedural.generators import procedural_rubric
from trainers.spec import RunSpec, validation_errors


def errors(**sections) -> dict[str, str]:
    config = {"model": {"path": "./m"}, "data": {"procedural": {"task": "sorting"}}, "rubric": procedural_rubric()}
    with pytest.raises(ValidationError) as exc:
        RunSpec.model_validate({**config, **sections})
    return validation_errors(exc.value)


def test_a_procedural_spec_needs_no_data_path():
    spec = RunSpec.model_validate({"model": {"path": "./m"}, "data": {"procedural": {}}, "rubric": procedural_rubric()})
    p = spec.data.procedural
    assert spec.data.path is None
    assert (p.task, p.start_difficulty, p.target_band, p.window, p.adapt) == ("arithmetic", 1, (0.25, 0.75), 4, True)
    assert p.highest == 8 and list(p.levels) == list(range(1, 9))


@pytest.mark.parametrize(
    "data,where,message",
    [
        ({}, "data.path", "set a dataset path, or procedural"),
        ({"path": "a.jsonl", "procedural": {}}, "data.path", "two prompt sources"),
        ({"procedural": {"task": "nope"}}, "data.procedural.task", "valid: arithmetic, sorting"),
        ({"procedural": {"max_difficulty": 9}}, "data.procedural.max_difficulty", "levels 1..8"),
        ({"procedural": {"min_difficulty": 3, "max_difficulty": 2}}, "data.procedural.min_difficulty", "above"),
        ({"procedural": {"start_difficulty": 5, "max_difficulty": 4}}, "data.procedural.start_difficulty", "[1, 4]"),
        ({"procedural": {"target_band": [0.7, 0.7]}}, "data.procedural.target_band", "low < high"),
        ({"procedural": {"task": "lookup"}}, "data.procedural.task", "needs the environment 'lookup'"),
    ],
)
def test_bad_procedural_settings_are_refused_beside_their_field(data, where, message):
    found = errors(data=data)
    assert message in found[where], found


def test_a_single_turn_task_refuses_another_tasks_environment():
    found = errors(environment={"kind": "lookup"})
    assert "no environment, or one that starts from its prompt" in found["data.procedural.task"]


@pytest.mark.parametrize(
    "environment",
    [
        {"kind": "tools", "params": {"tools": [{"kind": "calculator"}]}},
        {"kind": "python", "params": {"code": "class Env:\n    def reset(self, row): ...\n    def step(self, text): ..."}},
    ],
)
def test_a_single_turn_task_runs_in_an_environment_that_starts_from_its_prompt(environment):
    """Procedural arithmetic with a tools environment (the calculator) was refused (issue 27)."""
    spec = RunSpec.model_validate({"model": {"path": "./m"}, "data": {"procedural": {"task": "arithmetic"}},
                                   "rubric": procedural_rubric(), "environment": environment})  # fmt: skip
    assert (spec.data.procedural.task, spec.environment.kind) == ("arithmetic", environment["kind"])


def test_an_environment_task_runs_in_its_environment():
    spec = RunSpec.model_validate({
        "model": {"path": "./m"}, "data": {"procedural": {"task": "guess_number", "max_difficulty": 10}},
        "rubric": procedural_rubric(), "environment": {"kind": "guess_number"},
    })  # fmt: skip
    assert spec.data.procedural.environment == "guess_number"
