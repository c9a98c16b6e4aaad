"""A run's settings as TRL and verl configs (trainers.exports): the values they carry, what they list as lost,
and that the TRL script's GRPOConfig(**kwargs) really constructs with the installed trl."""

import dataclasses
import warnings

import pytest
import yaml

from trainers.exports import to_trl, to_verl
from trainers.exports.ledger import flatten
from trainers.spec import RunSpec

RUBRIC = {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 0.7, "params": {}},
                       {"name": "short", "kind": "length", "weight": 0.3, "params": {}}]}  # fmt: skip


def spec(**sections) -> RunSpec:
    config = {"model": {"path": "/models/tiny"}, "data": {"path": "/data/qa.jsonl"}, "rubric": RUBRIC,
              "algorithm": {"group_size": 4}, "optim": {"prompts_per_step": 3, "micro_batch_size": 5, "total_steps": 7}}  # fmt: skip
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return RunSpec.model_validate(config)


def unmapped(export) -> dict:
    return {u.field: u for u in export.unmapped}


def test_every_setting_is_carried_over_or_listed_as_lost():
    for make in (to_trl, to_verl):
        run = spec(algorithm={"group_size": 4, "dynamic_sampling": True}, validation={"holdout_fraction": 0.2})
        export = make(run)
        leaves = set(flatten(run.model_dump(mode="json")))
        lost = set(unmapped(export))
        assert lost <= leaves
        header = export.text.split("from trl import")[0] if make is to_trl else export.text.split("\ndata:")[0]
        for field in lost:  # each lost setting is named in the file's opening comment
            assert field in header, field


def test_the_trl_mapping_carries_the_batch_the_clip_and_the_loss():
    run = spec(algorithm={"group_size": 4, "policy_loss": "ppo_clip", "clip_ratio_high": 0.28, "dual_clip_c": 3.0,
                          "loss_agg_mode": "token-mean", "advantage_estimator": "dr_grpo", "ppo_epochs": 2,
                          "kl_beta": 0.05},
               optim={"warmup_steps": 2, "lr_scheduler": "cosine"})  # fmt: skip
    config = to_trl(run).settings
    # 3 prompts x 4 = 12 completions per step; micro 5 does not divide 12: the largest divisor under it is 4.
    assert (config["num_generations"], config["generation_batch_size"]) == (4, 12)
    assert (config["per_device_train_batch_size"], config["gradient_accumulation_steps"]) == (4, 3)
    assert (config["num_iterations"], config["max_steps"], config["warmup_steps"]) == (2, 14, 4)
    assert (config["epsilon"], config["epsilon_high"], config["delta"]) == (0.2, 0.28, 3.0)
    assert (config["importance_sampling_level"], config["loss_type"], config["scale_rewards"]) == (
        "token",
        "dapo",
        "none",
    )
    assert (config["beta"], config["use_bias_correction_kl"], config["lr_scheduler_type"]) == (0.05, False, "cosine")
    assert config["reward_weights"] == [0.7, 0.3]
    lost = unmapped(to_trl(spec(algorithm={"group_size": 4, "advantage_estimator": "rloo", "kl_beta": 0.1,
                                           "kl_estimator": "k2"})))  # fmt: skip
    assert "'rloo'" in lost["algorithm.advantage_estimator"].why and not lost["algorithm.advantage_estimator"].default
    assert lost["algorithm.kl_estimator"].why == "TRL's KL term is k3 only"


def test_the_verl_mapping_uses_verls_keys():
    run = spec(algorithm={"group_size": 4, "advantage_estimator": "rloo", "kl_beta": 0.1, "kl_estimator": "k2",
                          "dynamic_sampling": True, "dynamic_sampling_max_rounds": 3, "overlong_penalty": True,
                          "overlong_buffer": 8}, rollout={"max_new_tokens": 32, "top_k": 0})  # fmt: skip
    export = to_verl(run)
    config = yaml.safe_load(export.text)  # the comment header is YAML comments: the file loads as it is
    assert config == export.settings
    assert (config["data"]["train_batch_size"], config["actor_rollout_ref"]["rollout"]["n"]) == (3, 4)
    assert config["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] == 3  # one update per pass
    assert config["actor_rollout_ref"]["rollout"]["top_k"] == -1
    actor = config["actor_rollout_ref"]["actor"]
    assert (actor["use_kl_loss"], actor["kl_loss_coef"], actor["kl_loss_type"]) == (True, 0.1, "k2")
    assert config["algorithm"]["adv_estimator"] == "rloo"
    assert config["algorithm"]["filter_groups"] == {"enable": True, "metric": "seq_reward", "max_num_gen_batches": 4}
    overlong = config["reward_model"]["reward_kwargs"]
    assert overlong == {"overlong_buffer_cfg": {"enable": True, "len": 8, "penalty_factor": 1.0, "log": False},
                        "max_resp_len": 32}  # fmt: skip
    assert "algorithm.dynamic_sampling" not in unmapped(export)
    # Each key the export writes is one of verl's (verl/trainer/config/_generated_ppo_trainer.yaml and the
    # algorithm/filter_groups.yaml, algorithm/rollout_correction.yaml it includes; the dapo reward manager's kwargs).
    for key in flatten(config):
        assert key in VERL_KEYS or key.startswith("reward_model.reward_kwargs."), key


def test_the_trl_script_constructs_its_grpo_config():
    trl = pytest.importorskip("trl")
    run = spec(algorithm={"group_size": 4, "policy_loss": "gspo", "clip_ratio_high": 0.28, "overlong_filter": True},
               validation={"holdout_fraction": 0.25}, checkpoint={"every_n_steps": 5},
               model={"lora": {"r": 8, "alpha": 16, "target_modules": ["q_proj"]}})  # fmt: skip
    export = to_trl(run, title="Run #1")
    names = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert set(export.settings) <= names  # every key is a GRPOConfig field of the installed trl
    scope = {"__name__": "exported"}  # not "__main__": the script builds its config and does not train
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(export.text, export.filename, "exec"), scope)  # noqa: S102 - our own generated script
    config = scope["config"]
    assert isinstance(config, trl.GRPOConfig)
    assert (config.num_generations, config.generation_batch_size, config.max_steps) == (4, 12, 7)
    assert (config.epsilon_high, config.importance_sampling_level, config.mask_truncated_completions) == (
        0.28,
        "sequence",
        True,
    )
    assert (config.save_steps, config.eval_steps, config.num_generations_eval) == (5, 10, 4)
    assert scope["LORA"]["r"] == 8 and [f.__name__ for f in scope["REWARD_FUNCS"]] == ["correct", "short"]
    # exact_match (extract 'full') and length are written out: they score as the studio does
    assert scope["correct"](["4", " 4 ", "5"], answer=["4", "4", "4"]) == [1.0, 1.0, 0.0]


VERL_KEY_TEXT = """
data.train_files data.val_files data.prompt_key data.max_prompt_length data.max_response_length data.train_batch_size
data.shuffle data.truncation data.filter_overlong_prompts
actor_rollout_ref.model.path actor_rollout_ref.model.trust_remote_code actor_rollout_ref.model.enable_gradient_checkpointing
actor_rollout_ref.model.lora_rank actor_rollout_ref.model.lora_alpha actor_rollout_ref.model.target_modules
actor_rollout_ref.actor.ppo_mini_batch_size actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu
actor_rollout_ref.actor.use_dynamic_bsz actor_rollout_ref.actor.ppo_max_token_len_per_gpu
actor_rollout_ref.actor.clip_ratio_low actor_rollout_ref.actor.clip_ratio_high actor_rollout_ref.actor.clip_ratio_c
actor_rollout_ref.actor.policy_loss.loss_mode actor_rollout_ref.actor.loss_agg_mode actor_rollout_ref.actor.entropy_coeff
actor_rollout_ref.actor.use_kl_loss actor_rollout_ref.actor.kl_loss_coef actor_rollout_ref.actor.kl_loss_type
actor_rollout_ref.actor.ppo_epochs actor_rollout_ref.actor.shuffle actor_rollout_ref.actor.grad_clip
actor_rollout_ref.actor.optim.lr actor_rollout_ref.actor.optim.weight_decay actor_rollout_ref.actor.optim.betas
actor_rollout_ref.actor.optim.lr_warmup_steps actor_rollout_ref.actor.optim.warmup_style
actor_rollout_ref.actor.fsdp_config.param_offload actor_rollout_ref.actor.fsdp_config.optimizer_offload
actor_rollout_ref.actor.fsdp_config.reshard_after_forward actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype
actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype
actor_rollout_ref.rollout.name actor_rollout_ref.rollout.n actor_rollout_ref.rollout.temperature
actor_rollout_ref.rollout.top_p actor_rollout_ref.rollout.top_k actor_rollout_ref.rollout.gpu_memory_utilization
actor_rollout_ref.rollout.enforce_eager actor_rollout_ref.rollout.free_cache_engine
actor_rollout_ref.rollout.calculate_log_probs actor_rollout_ref.rollout.val_kwargs.n
actor_rollout_ref.rollout.val_kwargs.temperature actor_rollout_ref.rollout.val_kwargs.top_p
actor_rollout_ref.rollout.val_kwargs.top_k actor_rollout_ref.rollout.val_kwargs.do_sample
actor_rollout_ref.rollout.multi_turn.enable actor_rollout_ref.rollout.multi_turn.max_assistant_turns
actor_rollout_ref.rollout.multi_turn.max_tool_response_length actor_rollout_ref.rollout.multi_turn.tool_config_path
algorithm.adv_estimator algorithm.norm_adv_by_std_in_grpo algorithm.gamma algorithm.use_kl_in_reward
algorithm.kl_penalty algorithm.kl_ctrl.type algorithm.kl_ctrl.kl_coef
algorithm.filter_groups.enable algorithm.filter_groups.metric algorithm.filter_groups.max_num_gen_batches
algorithm.rollout_correction.rollout_is algorithm.rollout_correction.rollout_is_threshold
algorithm.rollout_correction.rollout_rs algorithm.rollout_correction.rollout_rs_threshold
algorithm.rollout_correction.rollout_rs_threshold_lower
reward_model.enable reward_model.reward_manager custom_reward_function.path custom_reward_function.name
trainer.total_training_steps trainer.project_name trainer.experiment_name trainer.logger trainer.nnodes
trainer.n_gpus_per_node trainer.save_freq trainer.max_actor_ckpt_to_keep trainer.default_local_dir trainer.device
trainer.resume_mode trainer.resume_from_path trainer.test_freq trainer.val_before_train
"""
VERL_KEYS = set(VERL_KEY_TEXT.split())
