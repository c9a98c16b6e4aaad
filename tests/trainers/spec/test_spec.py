"""RunSpec: defaults, bounds, choices, presets and field-named errors."""

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from trainers.spec import PRESETS, RunSpec, apply_preset, preset_values, validation_errors

BASE = {
    "model": {"path": "var/tiny"},
    "data": {"path": "data.jsonl"},
    "rubric": {"criteria": [{"name": "correct", "kind": "exact_match"}]},
}


def errors_of(config: dict) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate(config)
    return validation_errors(info.value)


def test_it_fills_defaults_and_round_trips_through_json():
    spec = RunSpec.model_validate(BASE)
    assert spec.algorithm.group_size == 8
    assert spec.rubric.criteria[0].params["reference_field"] == "answer"
    again = RunSpec.model_validate(json.loads(spec.model_dump_json()))
    assert again == spec


def test_it_names_the_field_of_an_out_of_bounds_value():
    errs = errors_of({**BASE, "algorithm": {"group_size": 1}})
    assert list(errs) == ["algorithm.group_size"]
    assert "greater than or equal to 2" in errs["algorithm.group_size"]


def test_it_lists_valid_choices_for_an_unknown_estimator():
    errs = errors_of({**BASE, "algorithm": {"advantage_estimator": "ppo_gae"}})
    assert "grpo" in errs["algorithm.advantage_estimator"]
    assert "rloo" in errs["algorithm.advantage_estimator"]


def test_it_rejects_unknown_keys_instead_of_ignoring_them():
    errs = errors_of({**BASE, "optim": {"learning_rate": 1e-5}})
    assert "optim.learning_rate" in errs


def test_it_validates_criterion_params_against_the_kind():
    bad = {**BASE, "rubric": {"criteria": [{"name": "fmt", "kind": "regex", "params": {}}]}}
    errs = errors_of(bad)
    assert any(loc.startswith("rubric.criteria.0") for loc in errs)
    unknown = {**BASE, "rubric": {"criteria": [{"name": "x", "kind": "vibes"}]}}
    assert "exact_match" in " ".join(errors_of(unknown).values())


def test_it_rejects_repeated_criterion_names():
    crit = {"name": "c", "kind": "exact_match"}
    errs = errors_of({**BASE, "rubric": {"criteria": [crit, crit]}})
    assert "repeated: c" in errs["rubric"]


def test_it_refuses_an_overlong_buffer_longer_than_the_completion():
    errs = errors_of(
        {**BASE, "algorithm": {"overlong_penalty": True, "overlong_buffer": 64}, "rollout": {"max_new_tokens": 32}}
    )
    assert "overlong_buffer" in errs["__all__"]


def test_k1_is_refused_as_a_kl_loss_term_and_kept_in_the_reward():
    errs = errors_of({**BASE, "algorithm": {"kl_beta": 0.05, "kl_estimator": "k1"}})
    assert "'k1' as a loss term has zero expected gradient on-policy" in errs["__all__"]
    for allowed in ({"kl_beta": 0.05, "kl_estimator": "k1", "kl_in_reward": True}, {"kl_estimator": "k1"}):
        RunSpec.model_validate({**BASE, "algorithm": allowed})  # in the reward, or no KL at all


def test_vanilla_pg_is_refused_with_several_passes():
    errs = errors_of({**BASE, "algorithm": {"policy_loss": "vanilla_pg", "ppo_epochs": 2}})
    assert "'vanilla_pg' has no importance ratio" in errs["__all__"]
    RunSpec.model_validate({**BASE, "algorithm": {"policy_loss": "vanilla_pg", "ppo_epochs": 1}})


def test_it_refuses_a_dual_clip_the_policy_loss_would_ignore():
    errs = errors_of({**BASE, "algorithm": {"policy_loss": "gspo", "dual_clip_c": 3.0}})
    assert "dual_clip_c applies to policy_loss 'ppo_clip' only" in errs["__all__"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_a_valid_spec(name):
    config = apply_preset(BASE, name)
    if config["algorithm"].get("reward_advantage_weight") == 0:  # pure distillation: it needs a teacher
        config["teacher"] = {"teachers": [{"path": "var/teacher"}]}
    spec = RunSpec.model_validate(config)
    assert spec.algorithm.preset == name


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_says_where_it_differs_from_verls_defaults(name):
    from trainers.spec import PRESET_DESCRIPTIONS

    teacher = {"teacher": {"teachers": [{"path": "var/teacher"}]}}  # a preset of pure distillation needs one
    values = RunSpec.model_validate({**BASE, **teacher, "algorithm": preset_values(name)}).algorithm
    verl_part = PRESET_DESCRIPTIONS[name].split("vs verl: ", 1)[1]
    assert ("no dual-clip" in verl_part) == (values.dual_clip_c is None)  # verl applies c = 3
    assert (values.loss_agg_mode in verl_part) == (values.loss_agg_mode != "token-mean")
    if values.clip_ratio_high != 0.2:
        assert f"{values.clip_ratio_high:g}" in verl_part
    if values.kl_beta > 0:
        assert f"beta {values.kl_beta:g}" in verl_part


def test_explicit_algorithm_values_win_over_the_preset():
    config = {**BASE, "algorithm": {"clip_ratio_high": 0.5}}
    spec = RunSpec.model_validate(apply_preset(config, "dapo"))
    assert spec.algorithm.clip_ratio_high == 0.5
    assert spec.algorithm.dynamic_sampling is True
    assert preset_values("dapo")["clip_ratio_high"] == 0.28


def test_dr_grpo_normaliser_defaults_to_max_new_tokens():
    spec = RunSpec.model_validate({**apply_preset(BASE, "dr_grpo"), "rollout": {"max_new_tokens": 48}})
    assert spec.loss_agg_norm == 48


def test_the_schema_module_imports_without_torch():
    code = "import sys, trainers.spec, trainers.report; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_rubric_whose_weights_are_all_zero_is_refused_naming_its_criteria():
    zero = {
        "criteria": [{"name": "a", "kind": "exact_match", "weight": 0}, {"name": "b", "kind": "length", "weight": 0}]
    }
    errs = errors_of({**BASE, "rubric": zero})
    assert errs == {"rubric.criteria": "every criterion's weight is 0: the reward would be 0 for every rollout"}
    # A formula names the criteria it combines; its weights are not used, so it is not refused.
    RunSpec.model_validate({**BASE, "rubric": {**zero, "combine": "formula", "formula": "a + b"}})


def test_a_rubric_without_criteria_is_refused_saying_why():
    errs = errors_of({**BASE, "rubric": {"criteria": []}})
    assert "add at least one criterion" in errs["rubric.criteria"]


def test_an_unknown_preset_name_is_refused_listing_the_known_ones():
    errs = errors_of({**BASE, "algorithm": {"preset": "grpoo"}})
    assert list(errs) == ["algorithm.preset"]
    assert "unknown preset 'grpoo'" in errs["algorithm.preset"]
    assert all(name in errs["algorithm.preset"] for name in PRESETS)
    assert RunSpec.model_validate({**BASE, "algorithm": {"preset": None}}).algorithm.preset is None


@pytest.mark.parametrize("path", ["Qwen/Qwen2.5-0.5B", "openai-community/gpt2", "/models/x", "./x", "~/x", "models/sub/x"])
def test_a_model_path_is_a_folder_path_or_a_well_formed_hub_id(path):
    assert RunSpec.model_validate({**BASE, "model": {"path": path}}).model.path == path


# A bare name ("gpt2") is refused too: a hub id names its owner (the Hub redirects the old bare names to one),
# and a bare word is more often a mistyped folder than a model to download.
@pytest.mark.parametrize("path", ["my model", "org--x/name", "owner/na me", "-x/y", "gpt2", "org/name.git", "org/x-"])
def test_a_model_path_that_is_neither_is_refused_saying_so_plainly(path):
    errs = errors_of({**BASE, "model": {"path": path}, "algorithm": {}})
    assert "not a local folder" in errs["model.path"] and "not a hub id" in errs["model.path"]


def test_a_local_model_folder_must_exist_and_hold_a_config(tmp_path):
    from trainers.spec import model_folder_error

    assert model_folder_error(str(tmp_path / "gone")) == f"folder {tmp_path / 'gone'} does not exist"
    assert model_folder_error(str(tmp_path)) == f"{tmp_path} has no config.json: not a model folder"
    (tmp_path / "adapter_config.json").write_text("{}")
    assert model_folder_error(str(tmp_path), adapters_ok=True) is None  # a LoRA checkpoint
    (tmp_path / "config.json").write_text("{}")
    assert model_folder_error(str(tmp_path)) is None
    assert model_folder_error("Qwen/Qwen2.5-0.5B") is None  # a hub id is the worker's to download


def test_reward_watching_options_have_safe_defaults_and_bounds():
    spec = RunSpec.model_validate(BASE)
    assert (spec.reward.failure_warn_share, spec.reward.stop_after_failing_steps) == (0.5, 0)
    assert "reward.failure_warn_share" in errors_of({**BASE, "reward": {"failure_warn_share": 1.5}})


def test_the_agent_presets_validate_with_their_papers_settings():
    retool = RunSpec.model_validate(apply_preset(BASE, "retool")).algorithm
    assert (retool.clip_ratio_high, retool.loss_agg_mode, retool.kl_beta) == (0.28, "token-mean", 0.0)
    assert retool.overlong_filter and retool.advantage_estimator == "grpo"
    search = RunSpec.model_validate(apply_preset(BASE, "search_agent")).algorithm
    assert (search.kl_beta, search.kl_estimator, search.kl_in_reward) == (0.001, "k3", False)


@pytest.mark.parametrize("estimator", ["mt_grpo", "gigpo", "igpo"])
def test_the_turn_level_estimators_are_valid_choices(estimator):
    spec = RunSpec.model_validate({**BASE, "algorithm": {"advantage_estimator": estimator}})
    assert spec.algorithm.advantage_estimator == estimator
    assert (spec.algorithm.turn_advantage_weight, spec.algorithm.step_advantage_weight) == (1.0, 1.0)


def test_turn_credit_weights_are_bounded_and_information_gain_is_off_by_default():
    assert RunSpec.model_validate(BASE).algorithm.info_gain_weight == 0.0
    errs = errors_of({**BASE, "algorithm": {"step_advantage_weight": -1, "info_gain_answer_field": ""}})
    assert set(errs) == {"algorithm.step_advantage_weight", "algorithm.info_gain_answer_field"}


def test_turn_credit_reference_modes_default_to_todays_definitions_and_presets_select_their_references():
    from trainers.algorithms.turns import CreditModes, credit_modes

    assert credit_modes(RunSpec.model_validate(BASE).algorithm) == CreditModes()
    assert RunSpec.model_validate(BASE).algorithm.info_gain_type == "log_prob"  # what the help says it measures
    presets = {name: RunSpec.model_validate(apply_preset(BASE, name)).algorithm for name in
               ("gigpo", "gigpo_std", "mt_grpo", "igpo")}  # fmt: skip
    assert credit_modes(presets["gigpo"]) == CreditModes(gigpo_episode_stats="step", gigpo_norm="mean")
    assert credit_modes(presets["gigpo_std"]) == CreditModes(gigpo_episode_stats="step", gigpo_norm="mean_std")
    assert presets["gigpo"].gamma == presets["gigpo_std"].gamma == 0.95
    assert credit_modes(presets["mt_grpo"]).mt_grpo_no_tool == "combined" and presets["mt_grpo"].adv_eps == 1e-4
    igpo = presets["igpo"]
    assert (igpo.advantage_estimator, igpo.info_gain_type, igpo.igpo_norm) == ("igpo", "log_prob", "separate")
    assert igpo.gamma == 1.0 and igpo.info_gain_weight > 0
    errs = errors_of({**BASE, "algorithm": {"gigpo_norm": "median", "info_gain_type": "bits"}})
    assert set(errs) == {"algorithm.gigpo_norm", "algorithm.info_gain_type"}


def test_logprob_chunking_and_precision_have_defaults_bounds_and_choices():
    spec = RunSpec.model_validate(BASE)
    assert (spec.optim.logprob_chunk_mib, spec.optim.precision) == (128, "float32")
    assert RunSpec.model_validate({**BASE, "optim": {"logprob_chunk_mib": 0}}).optim.logprob_chunk_mib == 0
    assert (
        "greater than or equal to 0"
        in errors_of({**BASE, "optim": {"logprob_chunk_mib": -1}})["optim.logprob_chunk_mib"]
    )
    message = errors_of({**BASE, "optim": {"precision": "float16"}})["optim.precision"]
    assert "float32" in message and "bfloat16" in message


def test_a_sampling_dtype_of_its_own_needs_colocated_vllm():
    vllm = RunSpec.model_validate({**BASE, "rollout": {"engine": "vllm", "dtype": "bfloat16"}})
    assert (vllm.rollout.dtype, vllm.model.dtype) == ("bfloat16", "float32")
    errs = errors_of({**BASE, "rollout": {"dtype": "bfloat16"}})
    assert "needs engine 'vllm'" in errs["rollout.dtype"]
    RunSpec.model_validate({**BASE, "rollout": {"dtype": "float32"}})  # the model's own dtype says nothing new
    server = {"engine": "vllm", "dtype": "bfloat16", "vllm_server_url": "http://10.0.0.5:8000"}
    assert "the dtype it was started with" in errors_of({**BASE, "rollout": server})["rollout.dtype"]
    # auto is decided where the run starts, and means the model's dtype wherever the engine has no choice
    for rollout in ({"dtype": "auto"}, {**server, "dtype": "auto"}):
        RunSpec.model_validate({**BASE, "rollout": rollout})
