"""A run's settings as TRL: a Python script that builds the equivalent `trl.GRPOConfig` (field names of
TRL 1.x, checked against the installed trl by tests/trainers/test_exports.py) and trains with
`GRPOTrainer`, with one reward-function stub per rubric criterion; every setting TRL cannot express is
listed at the top of the script (and by `export.unmapped` for the run page).

How the studio's step maps onto TRL's: one step samples prompts_per_step x group_size completions and
makes one optimiser update per pass (algorithm.ppo_epochs passes); in TRL that is a generation batch of
the same size, split over per_device_train_batch_size x gradient_accumulation_steps x processes, reused
num_iterations times, one optimiser step per use. TRL's max_steps counts optimiser steps, so it is
total_steps x ppo_epochs.
"""

from __future__ import annotations

from typing import Any

from trainers.exports.embed import docstring, identifier, literal
from trainers.exports.ledger import Ledger
from trainers.exports.result import Export, header_lines
from trainers.spec import RunSpec

TARGET = "TRL's GRPOConfig"
# Our loss aggregation modes in TRL's loss_type.
LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}
# Our advantage estimators in TRL's scale_rewards (TRL's advantage is always r - group mean, scaled).
SCALE_REWARDS = {"grpo": "group", "dr_grpo": "none", "group_mean_batch_std": "batch"}
# Our off-policy corrections in TRL's vLLM importance-sampling modes (TRL applies them to vLLM's sampler only).
IS_MODES = {"tis": "token_truncate", "seq_tis": "sequence_truncate", "mis": "token_mask", "seq_mis": "sequence_mask",
            "icepop": "token_mask", "seq_icepop": "sequence_mask"}  # fmt: skip
SCHEDULES = {"constant": "constant", "linear": "linear", "cosine": "cosine"}
# Criterion kinds the script scores as the studio does (trainers.rewards.criteria.<kind>), written out in
# plain Python over PARAMS (the criterion's params as a literal); every other kind is a stub to fill in.
# TRL hands each completion as text, or for conversational prompts as [{"role": "assistant", "content": ...}].
TEXT_OF = """def _text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]"""
BUILT_IN = {
    "contains": """    out = []
    for completion in completions:
        text = _text(completion) if PARAMS["case_sensitive"] else _text(completion).casefold()
        found = [k for k in PARAMS["keywords"] if (k if PARAMS["case_sensitive"] else k.casefold()) in text]
        if PARAMS["mode"] == "all":
            hits = float(len(found) == len(PARAMS["keywords"]))
        elif PARAMS["mode"] == "any":
            hits = float(bool(found))
        else:
            hits = len(found) / len(PARAMS["keywords"])
        out.append(1.0 - hits if PARAMS["forbidden"] else hits)
    return out""",
    # extract="full" only (the default): the other extractions stay the studio's (a stub says so).
    "exact_match": """    import re
    import string

    def normalise(text):
        if PARAMS["strip_punctuation"]:
            text = text.translate(str.maketrans("", "", string.punctuation))
        if PARAMS["strip_whitespace"]:
            text = re.sub(r"\\s+", " ", text).strip()
        return text if PARAMS["case_sensitive"] else text.casefold()

    out = []
    for completion, expected in zip(completions, columns[PARAMS["reference_field"]], strict=True):
        accepted = [str(e) for e in expected] if isinstance(expected, list) else [str(expected)]
        got = normalise(_text(completion))
        out.append(float(any(got == normalise(a) for a in accepted)))
    return out""",
    "length": """    out = []
    for completion in completions:
        text = _text(completion)
        n = len(text) if PARAMS["unit"] == "chars" else len(text.split())
        low, high = PARAMS["target_min"], PARAMS["target_max"]
        distance = low - n if n < low else n - high if n > high else 0
        out.append(max(0.0, 1.0 - PARAMS["slope"] * distance) if distance else 1.0)
    return out""",
}


def _written_out(criterion: dict[str, Any]) -> bool:
    """Whether the script scores `criterion` itself (BUILT_IN), else it is a stub."""
    kind, params = criterion.get("kind"), criterion.get("params") or {}
    return kind in BUILT_IN and (kind != "exact_match" or params.get("extract", "full") == "full")


def to_trl(spec: RunSpec, *, title: str = "") -> Export:
    """The TRL script for `spec`; `title` names the run in its header."""
    ledger = Ledger(spec, TARGET)
    config = _config(ledger)
    lora = _lora(ledger)
    data = _data(ledger)
    criteria = _criteria(ledger)
    _studio_only(ledger)
    _off_as_in_trl(ledger)
    text = _script(spec, title, config, lora, data, criteria, ledger)
    return Export("trl", f"{_slug(spec.name)}_trl_grpo.py", text, config, ledger.unmapped(), ledger.approximate)


def _config(ledger: Ledger) -> dict[str, Any]:
    v, take = ledger.value, ledger.take
    c: dict[str, Any] = {"output_dir": take("checkpoint.output_dir"), "run_name": take("name")}
    # --- batch: one studio step = one generation batch of prompts x group completions
    group, prompts = take("algorithm.group_size"), take("optim.prompts_per_step")
    world = take("parallel.procs_per_node") * take("parallel.nodes")
    completions = prompts * group
    per_process = completions // world if completions % world == 0 else completions
    if completions % world:
        ledger.approx(f"{completions} completions per step do not divide over {world} processes: the script sets "
                      "them for one process; set per_device_train_batch_size for your launch")  # fmt: skip
    micro = take("optim.micro_batch_size")
    per_device = max(d for d in range(1, min(micro, per_process) + 1) if per_process % d == 0)
    if per_device != micro:
        ledger.approx(f"optim.micro_batch_size {micro} -> per_device_train_batch_size {per_device}, the largest that "
                      f"divides the {per_process} completions each process trains on per step")  # fmt: skip
    c.update(num_generations=group, per_device_train_batch_size=per_device,
             gradient_accumulation_steps=per_process // per_device, generation_batch_size=completions)  # fmt: skip
    if take("optim.micro_batching") != "padded":
        ledger.approx("optim.micro_batching (balanced / packed by tokens) -> TRL's fixed per-device batches "
                      "(memory and speed only; optim.micro_batch_tokens has no equivalent)")  # fmt: skip
    epochs = take("algorithm.ppo_epochs")
    c["num_iterations"] = epochs
    c["max_steps"] = take("optim.total_steps") * epochs
    # --- optimiser (torch AdamW both sides) and schedule
    c.update(learning_rate=take("optim.lr"), weight_decay=take("optim.weight_decay"), adam_beta1=take("optim.beta1"),
             adam_beta2=take("optim.beta2"), optim="adamw_torch")  # fmt: skip
    norm = take("optim.max_grad_norm")
    c["max_grad_norm"] = 0.0 if norm is None else norm  # 0 switches clipping off in transformers
    warmup, schedule = take("optim.warmup_steps"), take("optim.lr_scheduler")
    c["lr_scheduler_type"] = "constant_with_warmup" if schedule == "constant" and warmup else SCHEDULES[schedule]
    c["warmup_steps"] = warmup * epochs
    if warmup:
        ledger.approx("optim.warmup_steps: transformers warms up from 0 to the peak ((s) / warmup), the studio from "
                      "1/(warmup+1) of it ((s+1) / (warmup+1))")  # fmt: skip
    if epochs > 1 and (warmup or schedule != "constant"):
        ledger.approx(f"the learning-rate schedule counts optimiser steps in TRL ({epochs} per studio step here), "
                      "studio steps in the studio: warm-up and decay are scaled by ppo_epochs")  # fmt: skip
    c["seed"] = take("optim.seed")
    ledger.approx("optim.seed: the same seed does not give the same samples: TRL and the studio draw from their "
                  "random streams in another order")  # fmt: skip
    c["shuffle_dataset"] = take("data.shuffle")
    # --- precision and model
    precision, mixed = take("optim.precision"), take("parallel.mixed_precision")
    c["bf16"] = precision == "bfloat16" or mixed == "bf16"
    c["model_init_kwargs"] = {"dtype": take("model.dtype")}
    c["trust_remote_code"] = take("model.trust_remote_code")
    c["gradient_checkpointing"] = take("model.gradient_checkpointing") or take("parallel.activation_checkpointing")
    c["disable_dropout"] = take("model.disable_dropout")
    # --- sampling
    c.update(max_completion_length=take("rollout.max_new_tokens"), temperature=take("rollout.temperature"),
             top_p=take("rollout.top_p"), top_k=take("rollout.top_k"))  # fmt: skip
    stop = take("rollout.stop")
    engine = take("rollout.engine")
    if stop:
        # vLLM's SamplingParams take `stop`; transformers' generate takes `stop_strings` (with the tokenizer).
        c["generation_kwargs"] = {"stop": stop} if engine == "vllm" else {"stop_strings": stop}
    ledger.unmapped_because("rollout.generation_batch_size", "sequences per engine call: memory and speed only; "
                            "TRL's generation_batch_size is the step's completions (set above)")  # fmt: skip
    if engine == "vllm":
        server = take("rollout.vllm_server_url")
        c.update(use_vllm=True, vllm_mode="server" if server else "colocate",
                 vllm_gpu_memory_utilization=take("rollout.vllm_gpu_memory_utilization"),
                 vllm_enable_sleep_mode=take("rollout.vllm_sleep_during_update"))  # fmt: skip
        if server:
            c["vllm_server_base_url"] = server
    # --- objective
    _objective(ledger, c)
    # --- checkpoints, validation, logging
    every = take("checkpoint.every_n_steps")
    c["save_strategy"] = "steps" if every else "no"
    if every:
        c["save_steps"] = every * epochs
    c["save_total_limit"] = take("checkpoint.keep_last")
    if v("validation.every_n_steps") is not None:
        c.update(eval_strategy="steps", eval_steps=take("validation.every_n_steps") * epochs,
                 eval_on_start=take("validation.at_start"),
                 num_generations_eval=take("validation.samples_per_prompt"))  # fmt: skip
    c.update(logging_steps=1, log_completions=True, report_to="none")
    return c


def _objective(ledger: Ledger, c: dict[str, Any]) -> None:
    """Advantages, policy loss, clipping, KL, entropy, filters and off-policy corrections."""
    take, v = ledger.take, ledger.value
    estimator = v("algorithm.advantage_estimator")
    if estimator in SCALE_REWARDS:
        take("algorithm.advantage_estimator")
        c["scale_rewards"] = SCALE_REWARDS[estimator]
        if estimator != "dr_grpo":
            ledger.unmapped_because("algorithm.adv_eps", "TRL adds a fixed 1e-4 to the std")
    else:
        ledger.unmapped_because("algorithm.advantage_estimator", f"TRL's GRPO has no {estimator!r} advantage: it "
                                "always subtracts the group mean (scaled by scale_rewards); the script keeps 'group'")  # fmt: skip
    loss = v("algorithm.policy_loss")
    c.update(epsilon=take("algorithm.clip_ratio_low"), epsilon_high=take("algorithm.clip_ratio_high"))
    if loss == "gspo":
        take("algorithm.policy_loss")
        c["importance_sampling_level"] = "sequence"
    elif loss == "ppo_clip":
        take("algorithm.policy_loss")
        c["importance_sampling_level"] = "token"
    elif loss == "vanilla_pg" and v("algorithm.ppo_epochs") == 1:
        take("algorithm.policy_loss")
        ledger.approx("algorithm.policy_loss 'vanilla_pg' -> TRL's clipped loss: on-policy with one pass the ratio "
                      "is 1 and the clip never binds, so the gradient is the same")  # fmt: skip
    dual = take("algorithm.dual_clip_c")
    if dual is not None:
        c["delta"] = dual
        ledger.approx("algorithm.dual_clip_c -> delta (two-sided GRPO): TRL caps the ratio at delta for every token, "
                      "which binds only where the advantage is negative when delta > 1 + epsilon_high, as dual-clip")  # fmt: skip
    mode = v("algorithm.loss_agg_mode")
    if mode in LOSS_TYPES:
        take("algorithm.loss_agg_mode")
        c["loss_type"] = LOSS_TYPES[mode]
        if mode == "seq-mean-token-sum-norm":
            norm = take("algorithm.loss_agg_norm")
            if norm is not None and norm != v("rollout.max_new_tokens"):
                ledger.approx(f"algorithm.loss_agg_norm {norm}: TRL's dr_grpo divides by max_completion_length")
    else:
        c["loss_type"] = "dapo"
        ledger.unmapped_because("algorithm.loss_agg_mode", f"TRL has no {mode!r} aggregation; the script uses 'dapo' "
                                "(token-mean)")  # fmt: skip
    beta = v("algorithm.kl_beta")
    in_reward = v("algorithm.kl_in_reward")
    if beta and in_reward:
        c["beta"] = 0.0
        ledger.unmapped_because("algorithm.kl_beta", "KL in the reward (kl_in_reward): TRL adds KL to the loss only; "
                                "the script sets beta 0")  # fmt: skip
    else:
        c["beta"] = take("algorithm.kl_beta")
        take("algorithm.kl_in_reward")
        if not beta or v("algorithm.kl_estimator") == "k3":
            take("algorithm.kl_estimator")
        else:
            ledger.unmapped_because("algorithm.kl_estimator", "TRL's KL term is k3 only")
        c["use_bias_correction_kl"] = False  # the studio's k3 term is not weighted by the importance ratio
    c["entropy_coef"] = take("algorithm.entropy_coef")
    c["mask_truncated_completions"] = take("algorithm.overlong_filter")
    correction, cap = v("algorithm.correction"), v("algorithm.tis_cap")
    if v("rollout.engine") == "vllm":
        if cap is not None:
            take("algorithm.tis_cap")
            c.update(vllm_importance_sampling_correction=True, vllm_importance_sampling_mode="token_truncate",
                     vllm_importance_sampling_clip_max=cap)  # fmt: skip
        elif correction in IS_MODES:
            take("algorithm.correction", "algorithm.correction_high")
            c.update(vllm_importance_sampling_correction=True, vllm_importance_sampling_mode=IS_MODES[correction],
                     vllm_importance_sampling_clip_max=v("algorithm.correction_high"))  # fmt: skip
            if correction in ("icepop", "seq_icepop"):
                take("algorithm.correction_low")
                c["vllm_importance_sampling_clip_min"] = v("algorithm.correction_low")
            if correction == "seq_icepop":
                ledger.approx("seq_icepop -> sequence_mask: TRL's sequence ratio is the product over tokens, the "
                              "studio's band is on the geometric mean")  # fmt: skip
        elif correction is None:
            c["vllm_importance_sampling_correction"] = False  # TRL corrects by default; the studio did not
    if v("algorithm.dynamic_sampling"):
        ledger.unmapped_because("algorithm.dynamic_sampling", "TRL's GRPOTrainer keeps every group: no DAPO "
                                "dynamic sampling (groups whose rewards agree still count, with advantage 0)")  # fmt: skip
    if v("algorithm.overlong_penalty"):
        ledger.unmapped_because("algorithm.overlong_penalty", "not a GRPOConfig setting: add "
                                "trl.rewards.get_soft_overlong_punishment(max_completion_len, soft_punish_cache) to "
                                "reward_funcs (the script's comment shows it)")  # fmt: skip


def _off_as_in_trl(ledger: Ledger) -> None:
    """Features the run left off, where off is what TRL does: carried over (nothing to lose)."""
    v = ledger.value
    off = {
        "algorithm.dynamic_sampling": False, "algorithm.overlong_penalty": False, "algorithm.info_gain_weight": 0.0,
        "curriculum.hints": False, "curriculum.sampler": "uniform", "curriculum.budget": "fixed",
        "rollout.asynchronous.mode": "sync", "algorithm.tis_cap": None, "algorithm.correction": None,
        "data.skip_invalid_rows": False, "model.ref_path": None, "algorithm.preset": None, "rubric.formula": None,
        "parallel.cpu_offload": False, "rollout.vllm_server_url": None,
    }  # fmt: skip
    for name, value in off.items():
        if name in ledger.leaves and v(name) == value and name not in ledger.taken:
            ledger.take(name)
    ledger.take("model.path")  # the script's MODEL


def _lora(ledger: Ledger) -> dict[str, Any] | None:
    """peft's LoraConfig for GRPOTrainer(peft_config=...), when the run trains LoRA adapters."""
    if ledger.value("model.lora.r") is None:
        return None
    take = ledger.take
    return {"r": take("model.lora.r"), "lora_alpha": take("model.lora.alpha"),
            "lora_dropout": take("model.lora.dropout"), "target_modules": take("model.lora.target_modules"),
            "task_type": "CAUSAL_LM"}  # fmt: skip


def _data(ledger: Ledger) -> dict[str, Any]:
    """How the script loads and shapes the rows: TRL reads a `prompt` column (conversational: a list of
    messages, which it renders with the chat template) and hands the other columns to reward functions."""
    take, v = ledger.take, ledger.value
    if v("data.procedural.task") is not None:
        ledger.unmapped_because("data.procedural.task", "generated prompts at an adaptive level: TRL trains on a "
                                "dataset; generate one with the studio's procedural task first")  # fmt: skip
        return {"path": None}
    fmt = take("data.format")
    path = take("data.path")
    data = {
        "path": path, "format": fmt, "split": take("data.split"), "prompt_field": take("data.prompt_field"),
        "messages_field": take("data.messages_field"), "answer_field": take("data.answer_field"),
        "extra_fields": take("data.extra_fields"), "system_prompt": take("data.system_prompt"),
        "chat": take("data.use_chat_template"), "limit": take("data.limit"),
    }  # fmt: skip
    if v("validation.path"):
        data["validation"] = {"path": take("validation.path"), "format": take("validation.format"),
                              "split": take("validation.split"), "limit": take("validation.num_prompts")}  # fmt: skip
    elif v("validation.holdout_fraction") is not None:
        data["holdout"] = {"fraction": take("validation.holdout_fraction"), "seed": take("validation.holdout_seed")}
        ledger.approx("validation.holdout_fraction: the script holds out rows with datasets' train_test_split: "
                      "the same share, other rows than the studio's")  # fmt: skip
    if v("data.max_prompt_tokens") is not None:
        ledger.unmapped_because("data.max_prompt_tokens", "TRL 1.x has no prompt length limit (max_prompt_length "
                                "was removed): filter long prompts from the dataset")  # fmt: skip
    return data


def _criteria(ledger: Ledger) -> list[dict[str, Any]]:
    """One reward function per criterion (written out for the kinds in BUILT_IN, else a stub to fill in),
    weighted as the rubric weights them."""
    criteria = ledger.value("rubric.criteria") or []
    combine = ledger.value("rubric.combine")
    if combine == "weighted_sum":
        ledger.take("rubric.combine")
    if all(_written_out(c) for c in criteria):
        ledger.take("rubric.criteria")  # every criterion scores in the script as in the studio
    else:
        ledger.unmapped_because("rubric.criteria", "TRL takes reward functions written in Python: the script scores "
                                "contains, length and exact_match (extract 'full') criteria as the studio does and has a "
                                "stub for each other criterion, weighted by reward_weights")  # fmt: skip
    ledger.unmapped_because("rubric.formula", "TRL sums weighted rewards; a formula over criteria has no equivalent")
    return criteria


def _studio_only(ledger: Ledger) -> None:
    """Reasons for the settings that are the studio's own business (no trainer has them)."""
    for name in ledger.leaves:
        if name.startswith("eval."):
            ledger.unmapped_because(name, "a setting of the studio's evaluation-only runs (pass@k of a checkpoint)")
    studio = "the studio's own (how its workers run, restart and report), not a training setting"
    for name in ("checkpoint.max_restarts", "checkpoint.every_n_minutes", "reward.failure_warn_share",
                 "reward.stop_after_failing_steps", "optim.logprob_chunk_mib", "rollout.vllm_enforce_eager",
                 "rollout.cuda_graphs"):  # fmt: skip
        ledger.unmapped_because(name, studio if not name.startswith(("optim.", "rollout.")) else
                                "memory and speed only; no GRPOConfig setting")  # fmt: skip


def _script(spec: RunSpec, title: str, config: dict[str, Any], lora: dict[str, Any] | None,
            data: dict[str, Any], criteria: list[dict[str, Any]], ledger: Ledger) -> str:  # fmt: skip
    """The script's text. Every value of the run (names, paths, fields, settings) goes in through
    `trainers.exports.embed`: as a literal (repr, pprint) or inside an escaped docstring, never as code."""
    taken: set[str] = {"main", "load_rows", "config", "_read", "_shape"}
    names = [identifier(c.get("name", f"criterion_{i}"), taken) for i, c in enumerate(criteria)]
    if criteria:
        config["reward_weights"] = [float(c.get("weight", 1.0)) for c in criteria]
    head = [(title or f"Run {spec.name!r}") + " as TRL GRPO (exported by Rollout Studio).", ""]
    head += header_lines(ledger, prefix="")
    lines = [docstring("\n".join(head) + "\n"), "", "from trl import GRPOConfig, GRPOTrainer", "",
             f"MODEL = {literal(spec.model.path)}", "",
             "# Every setting of the run that GRPOConfig has; the rest is listed above.",
             f"CONFIG = {literal(config)}", "", "config = GRPOConfig(**CONFIG)", ""]  # fmt: skip
    if lora:
        lines += [f"LORA = {literal(lora, indent=1)}", ""]
    lines += ["", "# Reward functions: one per rubric criterion (kinds written out here score as the studio does;",
              "# the others are stubs to fill in). TRL passes each dataset column by name (answer, and the extra",
              "# fields) and sums them with reward_weights."]  # fmt: skip
    if any(_written_out(c) for c in criteria):
        lines += ["", "", TEXT_OF]
    for name, criterion in zip(names, criteria, strict=True):
        params = criterion.get("params") or {}
        about = f"Criterion {criterion.get('name')!r} ({criterion.get('kind')}), params {params!r}."
        lines += ["", "", f"def {name}(completions, **columns):", docstring(about, indent="    ")]
        if _written_out(criterion):
            lines += [f"    PARAMS = {literal(params, indent=1, width=100)}", BUILT_IN[criterion["kind"]]]
        else:
            lines += [f"    raise NotImplementedError({literal(_stub_message(criterion))})"]
    lines += ["", "", f"REWARD_FUNCS = [{', '.join(names)}]"]
    if spec.algorithm.overlong_penalty:
        lines += ["# DAPO's soft overlong punishment, as the run had it:",
                  "# from trl.rewards import get_soft_overlong_punishment",
                  f"# REWARD_FUNCS.append(get_soft_overlong_punishment({int(spec.rollout.max_new_tokens)}, "
                  f"{int(spec.algorithm.overlong_buffer)}))"]  # fmt: skip
    lines += ["", "", *_loader(data), "", "", "def main():", "    train, evaluation = load_rows()",
              "    trainer = GRPOTrainer(", "        model=MODEL,", "        reward_funcs=REWARD_FUNCS,", "        args=config,",
              "        train_dataset=train,", "        eval_dataset=evaluation,"]  # fmt: skip
    if lora:
        lines += ["        peft_config=__import__('peft').LoraConfig(**LORA),"]
    lines += ["    )", "    trainer.train()", "    trainer.save_model()", "", "",
              'if __name__ == "__main__":', "    main()", ""]  # fmt: skip
    return "\n".join(lines)


def _loader(data: dict[str, Any]) -> list[str]:
    """`load_rows()`: the dataset as TRL wants it (a `prompt` column of messages, `answer`, the extra fields)."""
    if data.get("path") is None:
        return ["def load_rows():", "    raise NotImplementedError('the run generated its prompts: export a dataset')"]
    builder = {"jsonl": "json", "csv": "csv", "parquet": "parquet"}
    lines = ["from datasets import load_dataset, load_from_disk  # noqa: E402", "", "",
             "def _read(path, fmt, split, limit):",
             "    if fmt == 'hf':",
             "        rows = load_from_disk(path)",
             "        rows = rows[split] if hasattr(rows, 'keys') else rows",
             "    else:",
             f"        builders = {literal(builder)}",
             "        fmt = fmt if fmt != 'auto' else path.rsplit('.', 1)[-1].replace('json', 'jsonl').replace('jsonll', 'jsonl')",
             "        rows = load_dataset(builders[fmt], data_files=path, split='train')",
             "    return rows.select(range(min(limit, len(rows)))) if limit else rows", "", "",
             *_shape_lines(data),
             "    return out", "", "",
             "def load_rows():",
             f"    rows = _read({_args(data['path'], data['format'], data['split'], data.get('limit'))})",
             "    rows = rows.map(_shape, remove_columns=rows.column_names)",
             "    evaluation = None"]  # fmt: skip
    if "validation" in data:
        val = data["validation"]
        lines += [f"    evaluation = _read({_args(val['path'], val['format'], val['split'], val['limit'])})",
                  "    evaluation = evaluation.map(_shape, remove_columns=evaluation.column_names)"]  # fmt: skip
    elif "holdout" in data:
        hold = data["holdout"]
        lines += [f"    parts = rows.train_test_split(test_size={literal(hold['fraction'])}, seed={literal(hold['seed'])})",
                  "    rows, evaluation = parts['train'], parts['test']"]  # fmt: skip
    lines += ["    return rows, evaluation"]
    return lines


def _args(*values: Any) -> str:
    """Call arguments, each a literal."""
    return ", ".join(literal(v) for v in values)


def _stub_message(criterion: dict[str, Any]) -> str:
    return (
        f"return one float per completion, as criterion {criterion.get('name')!r} ({criterion.get('kind')}) scores it"
    )


def _shape_lines(data: dict[str, Any]) -> list[str]:
    """`_shape(row)`: a row as TRL reads it, built for this run's field mapping."""
    messages = (f"list(row[{literal(data['messages_field'])}])" if data.get("messages_field")
                else f"[{{'role': 'user', 'content': row[{literal(data.get('prompt_field'))}]}}]")  # fmt: skip
    lines = ["def _shape(row):", f"    messages = {messages}"]
    if data.get("system_prompt"):
        lines += ["    if not any(m['role'] == 'system' for m in messages):",
                  f"        messages = [{{'role': 'system', 'content': {literal(data['system_prompt'])}}}, *messages]"]  # fmt: skip
    # With the chat template (the studio's default) TRL renders conversational prompts; without, the plain text.
    lines.append(
        "    out = {'prompt': messages}" if data.get("chat") else "    out = {'prompt': messages[-1]['content']}"
    )
    if data.get("answer_field"):
        lines.append(f"    out['answer'] = row[{literal(data['answer_field'])}]")
    for name in data.get("extra_fields") or []:
        lines.append(f"    out[{literal(name)}] = row[{literal(name)}]")
    return lines


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:60] or "run"
