"""A run's settings as a verl config: YAML of verl's ppo_trainer keys (verl/trainer/config/ppo_trainer.yaml:
data, actor_rollout_ref, algorithm, reward_model, custom_reward_function, trainer), to pass as the config or
to read as `key=value` overrides; every setting verl cannot express is listed in its opening comment (and by
`export.unmapped` for the run page).

How the studio's step maps onto verl's: data.train_batch_size prompts, actor_rollout_ref.rollout.n completions
each, and ppo_mini_batch_size equal to the batch, so each of ppo_epochs passes is one optimiser update, as here.
"""

from __future__ import annotations

from typing import Any

import yaml

from trainers.exports.embed import comment
from trainers.exports.ledger import Ledger
from trainers.exports.result import Export, header_lines
from trainers.spec import RunSpec

TARGET = "verl's ppo_trainer config"
ADV_ESTIMATORS = {"grpo": "grpo", "dr_grpo": "grpo", "rloo": "rloo", "reinforce_pp": "reinforce_plus_plus",
                  "reinforce_pp_baseline": "reinforce_plus_plus_baseline"}  # fmt: skip
LOSS_MODES = {"ppo_clip": "vanilla", "gspo": "gspo"}
KL_TYPES = {"k1": "k1", "k2": "k2", "k3": "low_var_kl", "abs": "abs"}
# Never binding: verl always applies dual-clip (clip_ratio_c); the studio only when dual_clip_c is set.
NO_DUAL_CLIP = 1.0e9


def to_verl(spec: RunSpec, *, title: str = "") -> Export:
    """The verl YAML for `spec`; `title` names the run in its header."""
    ledger = Ledger(spec, TARGET)
    config = {
        "data": _data(ledger),
        "actor_rollout_ref": _actor_rollout_ref(ledger),
        "algorithm": _algorithm(ledger),
        "reward_model": _reward_model(ledger),
        "custom_reward_function": _reward_function(ledger),
        "trainer": _trainer(ledger),
    }
    _studio_only(ledger)
    # The header is comments no value can end (embed.comment); the settings go through YAML's own dumper.
    head = [
        *comment(f"{title or f'Run {spec.name!r}'} as a verl ppo_trainer config (exported by Rollout Studio)."),
        "#",
    ]
    head += header_lines(ledger)
    head += ["#", "# verl reads parquet rows whose `prompt` column holds chat messages and whose reward_model.ground_truth",
             "# holds the answer: convert data.train_files first (e.g. examples/data_preprocess in verl's repository)."]  # fmt: skip
    text = "\n".join(head) + "\n" + yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=120)
    return Export(
        "verl", f"{_slug(spec.name)}_verl_ppo_trainer.yaml", text, config, ledger.unmapped(), ledger.approximate
    )


def _data(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    data: dict[str, Any] = {}
    if v("data.procedural.task") is not None:
        ledger.unmapped_because("data.procedural.task", "generated prompts at an adaptive level: verl trains on "
                                "dataset files")  # fmt: skip
    else:
        data["train_files"] = take("data.path")
        take("data.format")
        if v("data.format") not in ("parquet", "auto") or not str(v("data.path")).endswith(".parquet"):
            ledger.approx("data.path is not parquet: verl's RLHFDataset reads parquet files; convert it")
    if v("validation.path"):
        data["val_files"] = take("validation.path")
    data.update(prompt_key="prompt", max_prompt_length=take("data.max_prompt_tokens"),
                max_response_length=take("rollout.max_new_tokens"), train_batch_size=take("optim.prompts_per_step"),
                shuffle=take("data.shuffle"), truncation="left", filter_overlong_prompts=False)  # fmt: skip
    if v("data.prompt_field") != "prompt" or v("data.messages_field"):
        ledger.unmapped_because("data.prompt_field", "verl reads the prompt from prompt_key as chat messages: the "
                                "conversion writes them there")  # fmt: skip
    if v("data.system_prompt"):
        ledger.unmapped_because("data.system_prompt", "verl has no system prompt setting: put it in the converted "
                                "rows' messages")  # fmt: skip
    return data


def _actor_rollout_ref(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    model: dict[str, Any] = {"path": take("model.path"), "trust_remote_code": take("model.trust_remote_code"),
                             "enable_gradient_checkpointing": take("model.gradient_checkpointing")
                             or take("parallel.activation_checkpointing")}  # fmt: skip
    if v("model.lora.r") is not None:
        model.update(lora_rank=take("model.lora.r"), lora_alpha=take("model.lora.alpha"),
                     target_modules=take("model.lora.target_modules"))  # fmt: skip
    else:
        model["lora_rank"] = 0
    actor: dict[str, Any] = {
        "ppo_mini_batch_size": v("optim.prompts_per_step"),  # the whole batch: one update per pass
        "ppo_micro_batch_size_per_gpu": take("optim.micro_batch_size"),
        "use_dynamic_bsz": take("optim.micro_batching") != "padded",
        "clip_ratio_low": take("algorithm.clip_ratio_low"),
        "clip_ratio_high": take("algorithm.clip_ratio_high"),
        "entropy_coeff": take("algorithm.entropy_coef"),
        "ppo_epochs": take("algorithm.ppo_epochs"),
        "shuffle": False,
    }
    if actor["use_dynamic_bsz"]:
        actor["ppo_max_token_len_per_gpu"] = take("optim.micro_batch_tokens")
    dual = take("algorithm.dual_clip_c")
    actor["clip_ratio_c"] = dual if dual is not None else NO_DUAL_CLIP
    if dual is None:
        ledger.approx(f"verl always applies dual-clip: clip_ratio_c {NO_DUAL_CLIP:g} never binds, as the run had none")
    loss = v("algorithm.policy_loss")
    if loss in LOSS_MODES:
        actor["policy_loss"] = {"loss_mode": LOSS_MODES[take("algorithm.policy_loss")]}
    elif loss == "vanilla_pg" and v("algorithm.ppo_epochs") == 1:
        take("algorithm.policy_loss")
        actor["policy_loss"] = {"loss_mode": "vanilla"}
        ledger.approx("algorithm.policy_loss 'vanilla_pg' -> 'vanilla' (clipped): on-policy with one pass the ratio "
                      "is 1 and the clip never binds, so the gradient is the same")  # fmt: skip
    actor["loss_agg_mode"] = take("algorithm.loss_agg_mode")
    if v("algorithm.loss_agg_mode") == "seq-mean-token-sum-norm" and v("algorithm.loss_agg_norm") is not None:
        ledger.unmapped_because("algorithm.loss_agg_norm", "verl divides seq-mean-token-sum-norm by its own constant "
                                "(the response length)")  # fmt: skip
    beta, in_reward = v("algorithm.kl_beta"), v("algorithm.kl_in_reward")
    actor["use_kl_loss"] = bool(beta) and not in_reward
    if actor["use_kl_loss"]:
        actor.update(kl_loss_coef=take("algorithm.kl_beta"), kl_loss_type=KL_TYPES[take("algorithm.kl_estimator")])
        if v("algorithm.kl_estimator") == "k3":
            ledger.approx("kl_estimator 'k3' -> 'low_var_kl', which verl clamps to [-10, 10]")
    norm = take("optim.max_grad_norm")
    actor["grad_clip"] = norm if norm is not None else NO_DUAL_CLIP
    schedule = v("optim.lr_scheduler")
    actor["optim"] = {"lr": take("optim.lr"), "weight_decay": take("optim.weight_decay"),
                      "betas": [take("optim.beta1"), take("optim.beta2")], "lr_warmup_steps": take("optim.warmup_steps"),
                      "warmup_style": schedule if schedule in ("constant", "cosine") else "constant"}  # fmt: skip
    if schedule in ("constant", "cosine"):
        take("optim.lr_scheduler")
    else:
        ledger.unmapped_because("optim.lr_scheduler", f"verl's schedules are constant and cosine, not {schedule!r}")
    if v("optim.warmup_steps"):
        ledger.approx("optim.warmup_steps: verl warms up linearly from 0, the studio from 1/(warmup+1) of the peak")
    mixed = take("parallel.mixed_precision")
    sharding = take("parallel.sharding")
    offload = take("parallel.cpu_offload")
    actor["fsdp_config"] = {"param_offload": offload, "optimizer_offload": offload,
                            "reshard_after_forward": sharding == "full"}  # fmt: skip
    # verl computes in bf16 unless told otherwise; the studio in float32 unless told bf16.
    bf16 = take("optim.precision") == "bfloat16" or mixed == "bf16"
    actor["fsdp_config"]["mixed_precision"] = {"param_dtype": "bf16" if bf16 else "fp32", "reduce_dtype": "fp32",
                                               "buffer_dtype": "fp32"}  # fmt: skip
    rollout = _rollout(ledger)
    return {"model": model, "actor": actor, "rollout": rollout}


def _rollout(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    engine = take("rollout.engine")
    if engine != "vllm":
        ledger.approx("rollout.engine 'transformers' -> vllm: verl samples with vLLM or SGLang")
    top_k = take("rollout.top_k")
    rollout: dict[str, Any] = {
        "name": "vllm", "n": take("algorithm.group_size"), "temperature": take("rollout.temperature"),
        "top_p": take("rollout.top_p"), "top_k": top_k if top_k > 0 else -1,
        "gpu_memory_utilization": take("rollout.vllm_gpu_memory_utilization"),
        "enforce_eager": take("rollout.vllm_enforce_eager"),
        "free_cache_engine": take("rollout.vllm_sleep_during_update"),
        "calculate_log_probs": v("algorithm.tis_cap") is not None or v("algorithm.correction") is not None,
    }  # fmt: skip
    if v("rollout.vllm_server_url"):
        ledger.unmapped_because("rollout.vllm_server_url", "verl starts its own vLLM servers on the training GPUs")
    if v("validation.samples_per_prompt") is not None:
        temperature = v("validation.temperature")
        temperature = v("rollout.temperature") if temperature is None else take("validation.temperature")
        rollout["val_kwargs"] = {"n": take("validation.samples_per_prompt"), "temperature": temperature,
                                 "top_p": v("rollout.top_p"), "top_k": rollout["top_k"], "do_sample": temperature > 0}  # fmt: skip
    if v("environment.kind") is not None:
        rollout["multi_turn"] = {"enable": True, "max_assistant_turns": take("environment.max_turns"),
                                 "max_tool_response_length": take("environment.max_observation_chars"),
                                 "tool_config_path": None}  # fmt: skip
        ledger.unmapped_because("environment.kind", "verl's tools are Python classes named in tool_config_path: the "
                                "studio's environment (its kind and params) is not carried over")  # fmt: skip
    return rollout


def _algorithm(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    algo: dict[str, Any] = {}
    estimator = v("algorithm.advantage_estimator")
    if estimator in ADV_ESTIMATORS:
        algo["adv_estimator"] = ADV_ESTIMATORS[take("algorithm.advantage_estimator")]
        algo["norm_adv_by_std_in_grpo"] = estimator != "dr_grpo"
    else:
        algo["adv_estimator"] = "grpo"
        ledger.unmapped_because("algorithm.advantage_estimator", f"verl has no {estimator!r} estimator; the config "
                                "keeps 'grpo'")  # fmt: skip
    if v("algorithm.adv_eps") == 1e-6:
        take("algorithm.adv_eps")  # verl's GRPO adds 1e-6 to the std, as the default here
    else:
        ledger.unmapped_because("algorithm.adv_eps", "verl's GRPO adds a fixed 1e-6 to the std")
    algo["gamma"] = take("algorithm.gamma")
    beta = v("algorithm.kl_beta")
    algo["use_kl_in_reward"] = bool(take("algorithm.kl_in_reward")) and bool(beta)
    if algo["use_kl_in_reward"]:
        algo["kl_penalty"] = KL_TYPES[take("algorithm.kl_estimator")]
        algo["kl_ctrl"] = {"type": "fixed", "kl_coef": take("algorithm.kl_beta")}
    elif not beta:
        take("algorithm.kl_beta", "algorithm.kl_estimator")
    if v("algorithm.dynamic_sampling"):
        take("algorithm.dynamic_sampling")
        rounds = take("algorithm.dynamic_sampling_max_rounds")
        algo["filter_groups"] = {"enable": True, "metric": "seq_reward", "max_num_gen_batches": rounds + 1}
        ledger.approx("dynamic_sampling_max_rounds -> max_num_gen_batches (rounds + the first): verl stops with an "
                      "error when it runs out, the studio trains on the groups it has")  # fmt: skip
    else:
        take("algorithm.dynamic_sampling")
    correction = _rollout_correction(ledger)
    if correction:
        algo["rollout_correction"] = correction
    return algo


def _rollout_correction(ledger: Ledger) -> dict[str, Any] | None:
    """verl's rollout_correction (importance sampling `rollout_is`, rejection sampling `rollout_rs`)."""
    take, v = ledger.take, ledger.value
    cap, correction = v("algorithm.tis_cap"), v("algorithm.correction")
    if cap is not None:
        return {"rollout_is": "token", "rollout_is_threshold": take("algorithm.tis_cap")}
    if correction is None:
        return None
    high, low = v("algorithm.correction_high"), v("algorithm.correction_low")
    table = {
        "tis": {"rollout_is": "token", "rollout_is_threshold": high},
        "seq_tis": {"rollout_is": "sequence", "rollout_is_threshold": high},
        "mis": {"rollout_rs": "token", "rollout_rs_threshold": high, "rollout_rs_threshold_lower": 0.0},
        "seq_mis": {"rollout_rs": "sequence", "rollout_rs_threshold": high, "rollout_rs_threshold_lower": 0.0},
        "icepop": {"rollout_rs": "token", "rollout_rs_threshold": high, "rollout_rs_threshold_lower": low},
        "seq_icepop": {"rollout_rs": "geometric", "rollout_rs_threshold": high, "rollout_rs_threshold_lower": low,
                       "rollout_is": "sequence", "rollout_is_threshold": high},
    }  # fmt: skip
    if correction not in table:
        ledger.unmapped_because("algorithm.correction", f"verl's rollout correction has no {correction!r} mode")
        return None
    take("algorithm.correction", "algorithm.correction_high")
    if correction in ("icepop", "seq_icepop"):
        take("algorithm.correction_low")
    if correction in ("mis", "seq_mis", "icepop"):
        ledger.approx(f"correction {correction!r} -> rejection sampling (rollout_rs): the kept tokens are not "
                      "reweighted by their ratio as the studio's are")  # fmt: skip
    return table[correction]


def _reward_model(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    if not v("algorithm.overlong_penalty"):
        take("algorithm.overlong_penalty")
        return {"enable": False, "reward_manager": "naive"}
    take("algorithm.overlong_penalty", "algorithm.overlong_buffer", "algorithm.overlong_penalty_factor")
    return {"enable": False, "reward_manager": "dapo",
            "reward_kwargs": {"overlong_buffer_cfg": {"enable": True, "len": v("algorithm.overlong_buffer"),
                                                      "penalty_factor": v("algorithm.overlong_penalty_factor"),
                                                      "log": False},
                              "max_resp_len": v("rollout.max_new_tokens")}}  # fmt: skip


def _reward_function(ledger: Ledger) -> dict[str, Any]:
    ledger.unmapped_because("rubric.criteria", "verl scores with a Python compute_score(data_source, solution_str, "
                            "ground_truth, extra_info): write one that combines the criteria; their scoring is not "
                            "carried over")  # fmt: skip
    if ledger.value("rubric.combine") == "weighted_sum":
        ledger.unmapped_because("rubric.combine", "the weighted sum is compute_score's to do")
    return {"path": None, "name": "compute_score"}


def _trainer(ledger: Ledger) -> dict[str, Any]:
    take, v = ledger.take, ledger.value
    every = take("checkpoint.every_n_steps")
    trainer: dict[str, Any] = {
        "total_training_steps": take("optim.total_steps"), "project_name": "rollout-studio",
        "experiment_name": take("name"), "logger": ["console"], "nnodes": take("parallel.nodes"),
        "n_gpus_per_node": take("parallel.procs_per_node"), "save_freq": every if every else -1,
        "max_actor_ckpt_to_keep": take("checkpoint.keep_last"), "default_local_dir": take("checkpoint.output_dir"),
        "device": "cuda",
    }  # fmt: skip
    resume = take("checkpoint.resume_from")
    trainer.update(resume_mode="resume_path" if resume and resume != "latest" else "auto" if resume else "disable")
    if resume and resume != "latest":
        trainer["resume_from_path"] = resume
        ledger.approx("checkpoint.resume_from: verl resumes from its own checkpoint layout, not the studio's")
    if v("validation.every_n_steps") is not None:
        trainer.update(test_freq=take("validation.every_n_steps"), val_before_train=take("validation.at_start"))
    else:
        trainer.update(test_freq=-1, val_before_train=False)
    if v("checkpoint.save_final"):
        take("checkpoint.save_final")  # verl saves at the last step
    return trainer


def _studio_only(ledger: Ledger) -> None:
    off = {
        "curriculum.hints": False, "curriculum.sampler": "uniform", "curriculum.budget": "fixed",
        "rollout.asynchronous.mode": "sync", "algorithm.tis_cap": None, "algorithm.correction": None,
        "algorithm.info_gain_weight": 0.0, "data.skip_invalid_rows": False, "model.ref_path": None,
        "algorithm.preset": None, "rubric.formula": None, "rollout.vllm_server_url": None,
    }  # fmt: skip
    for name, value in off.items():  # off, as verl is: nothing to lose
        if name in ledger.leaves and ledger.value(name) == value and name not in ledger.taken:
            ledger.take(name)
    for name in ledger.leaves:
        if name.startswith("eval."):
            ledger.unmapped_because(name, "a setting of the studio's evaluation-only runs (pass@k of a checkpoint)")
    for name in ("checkpoint.max_restarts", "checkpoint.every_n_minutes", "reward.failure_warn_share",
                 "reward.stop_after_failing_steps"):  # fmt: skip
        ledger.unmapped_because(name, "the studio's own (how its workers run, restart and report)")
    for name in ("optim.logprob_chunk_mib", "rollout.generation_batch_size", "rollout.cuda_graphs"):
        ledger.unmapped_because(name, "memory and speed only; no ppo_trainer key")
    ledger.unmapped_because("optim.seed", "verl's config has no run seed: its data loader and sampler seed themselves")
    if ledger.value("rollout.stop"):
        ledger.unmapped_because("rollout.stop", "verl's rollout config has no stop strings")
    else:
        ledger.take("rollout.stop")
    ledger.unmapped_because("validation.holdout_fraction", "verl validates on val_files: write the held-out rows "
                            "to a file of their own")  # fmt: skip


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:60] or "run"
