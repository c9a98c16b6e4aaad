"""The teacher section (trainers.spec.teacher) and what it needs of the rest of the run, refused by field."""

import pytest
from pydantic import ValidationError

from trainers.access import ENDPOINT, MODEL, named
from trainers.spec import PRESETS, RunSpec, validation_errors

BASE = {
    "model": {"path": "var/tiny"},
    "data": {"path": "data.jsonl", "extra_fields": ["domain"]},
    "rubric": {"criteria": [{"name": "correct", "kind": "exact_match"}]},
}
MODEL_TEACHER = {"name": "big", "path": "/models/big"}
ENDPOINT_TEACHER = {"name": "api", "base_url": "http://127.0.0.1:8000/v1", "model": "big"}


def errors_of(**sections) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate({**BASE, **sections})
    return validation_errors(info.value)


def test_a_run_without_a_teacher_section_has_no_teacher():
    assert RunSpec.model_validate(BASE).teacher is None


def test_teachers_of_a_model_an_endpoint_and_routed_rows_are_accepted():
    spec = RunSpec.model_validate({**BASE, "teacher": {
        "route_field": "domain",
        "teachers": [{**MODEL_TEACHER, "rows": ["math"]}, {**ENDPOINT_TEACHER, "weight": 2.0}],
    }})  # fmt: skip
    assert [t.name for t in spec.teacher.teachers] == ["big", "api"]
    assert spec.teacher.endpoints[0].model == "big"


def test_a_teacher_path_and_base_url_go_through_the_path_policy():
    spec = RunSpec.model_validate({**BASE, "teacher": {"teachers": [MODEL_TEACHER, ENDPOINT_TEACHER]}})
    found = {(n.field, n.value, n.kind) for n in named(spec)}
    assert ("teacher.teachers.0.path", "/models/big", MODEL) in found
    assert ("teacher.teachers.1.base_url", ENDPOINT_TEACHER["base_url"], ENDPOINT) in found


def test_a_teacher_names_a_model_or_an_endpoint_not_both_nor_neither():
    both = errors_of(teacher={"teachers": [{**MODEL_TEACHER, "base_url": "http://h/v1", "model": "m"}]})
    assert "not both" in both["teacher.teachers.0.path"]
    neither = errors_of(teacher={"teachers": [{"name": "x"}]})
    assert "set a model (path) or an endpoint" in neither["teacher.teachers.0.path"]
    nameless = errors_of(teacher={"teachers": [{"name": "x", "base_url": "http://h/v1"}]})
    assert "endpoint's model" in nameless["teacher.teachers.0.model"]


def test_pure_distillation_without_a_teacher_is_refused():
    errs = errors_of(algorithm={"reward_advantage_weight": 0.0})
    assert "nothing to learn from without a teacher" in errs["algorithm.reward_advantage_weight"]


def test_routing_needs_a_field_the_rows_carry_and_one_teacher_per_value():
    unknown = errors_of(teacher={"route_field": "topic", "teachers": [{**MODEL_TEACHER, "rows": ["a"]}]})
    assert "'topic' is not a field the rows carry" in unknown["teacher.route_field"]
    assert "domain" in unknown["teacher.route_field"]
    unrouted = errors_of(teacher={"teachers": [{**MODEL_TEACHER, "rows": ["a"]}]})
    assert "need a route_field" in unrouted["teacher.route_field"]
    twice = errors_of(teacher={"route_field": "domain", "teachers": [
        {**MODEL_TEACHER, "rows": ["a"]}, {**ENDPOINT_TEACHER, "rows": ["a"]}]})  # fmt: skip
    assert "claimed by teacher 'big'" in twice["teacher.teachers.1.rows"]


def test_two_teachers_of_one_name_are_refused():
    errs = errors_of(teacher={"teachers": [MODEL_TEACHER, {**ENDPOINT_TEACHER, "name": "big"}]})
    assert "two teachers are named 'big'" in errs["teacher.teachers.1.name"]


def test_an_endpoint_teacher_needs_sampling_at_temperature_1():
    errs = errors_of(teacher={"teachers": [ENDPOINT_TEACHER]}, rollout={"temperature": 0.7})
    assert "temperature 1" in errs["rollout.temperature"]
    # A model teacher is scored at the sampling temperature, as the student is: any temperature.
    RunSpec.model_validate({**BASE, "teacher": {"teachers": [MODEL_TEACHER]}, "rollout": {"temperature": 0.7}})


def test_pure_distillation_refuses_dynamic_sampling():
    errs = errors_of(teacher={"teachers": [MODEL_TEACHER]},
                     algorithm={"reward_advantage_weight": 0.0, "dynamic_sampling": True})  # fmt: skip
    assert "every group carries the teacher's signal" in errs["algorithm.dynamic_sampling"]


def test_an_unknown_distillation_signal_lists_the_valid_ones():
    errs = errors_of(algorithm={"distill_signal": "forward_kl"})
    assert "valid: reverse_kl" in errs["algorithm.distill_signal"]


def test_the_on_policy_distillation_preset_validates_with_a_teacher():
    spec = RunSpec.model_validate({**BASE, "teacher": {"teachers": [MODEL_TEACHER]},
                                   "algorithm": {**PRESETS["on_policy_distillation"]}})  # fmt: skip
    assert spec.algorithm.reward_advantage_weight == 0.0 and spec.algorithm.kl_beta == 0.0
