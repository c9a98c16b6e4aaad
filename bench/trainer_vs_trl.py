"""Seconds per GRPO step and peak memory: our loop (`trainers.run.loop`) against TRL's `GRPOTrainer`.

    pip install "trl==1.16.0"        # for this benchmark only (not in requirements.txt); it adds
                                     # nothing else to the project's venv (pip install --dry-run)
    python bench/trainer_vs_trl.py --quick          # a few minutes: every case, tiny shapes, one step
    python bench/trainer_vs_trl.py                  # every case, float32 and bfloat16 (hours on a CPU)
    python bench/trainer_vs_trl.py --cases real --precisions bfloat16
    python bench/trainer_vs_trl.py --cases pretrained               # the real pretrained model, both precisions
    python bench/trainer_vs_trl.py --cases pretrained --quick       # smoke: 2 prompts x 2 completions, 16 tokens

Cases (each in float32 and in bfloat16 unless `--precisions` says otherwise). "real" is a random
model with real *shapes*; "pretrained" is a real pretrained model:

- **fixed** (`--sizes tiny,small`): models built by `trainers.demos.tiny` ("tiny" ~1 M, "small"
  ~14 M parameters, 768-token vocabulary), 8 prompts x 8 completions of exactly 64 tokens.
  TRL gets `min_new_tokens = max_completion_length` (EOS suppressed); our engine is given an
  end-of-sequence id that never occurs. The printed token counts confirm both did the same work.
- **eos**: the same, completions ending when the model samples EOS. A random model almost never
  samples EOS, so the bench edits the model once, for both trainers (`make_eos_likely`): EOS gets
  probability about `--eos-prob` per token (lengths roughly geometric, cut at 64).
- **real** (real shapes): hidden 512, 4 layers, the tiny tokenizer's ids embedded in a
  151,936-token vocabulary (Qwen's size: the LM head is 84 % of the parameters, as in small
  Qwen models), 4 prompts x 8 completions of up to 512 tokens with skewed lengths
  (`make_lengths_skewed`: about 3 in 4 completions end near 16 tokens, the rest run to 512),
  micro-batch 8. Prints peak resident memory as well.
- **pretrained** (real pretrained model): SmolLM2-135M-Instruct as `./studioctl setup` converts
  it (`trainers.models.pretrained.install(SMOLLM2, ...)`: bf16 weights loaded as float32 on both sides,
  30 layers, hidden 576, 49,152-token vocabulary, ChatML template, EOS = pad = `<|im_end|>`;
  `--model PATH` for another folder), unedited. 8 prompts x 8 completions of up to 128 tokens
  (`--pretrained-max-new-tokens`) ending at the model's own EOS (nothing suppressed), micro-batch
  `--micro-batch` (16). The prompts are short real questions (`CHAT_QUESTIONS`) rendered through
  the model's chat template (its default system message included) on both sides; the bench
  checks that both sides trained on the same prompt token ids. Both sides sample, so their
  completion lengths differ: the bench prints each side's length distribution and completion
  tokens per second, and the time ratio per token beside the ratio per step.

Same settings on both sides: prompts, reward (our rubric, called from TRL through a reward
function), group size (num_generations), max new tokens, temperature 1, top-p 1, no top-k, lr,
AdamW betas, grad-norm clip 1.0, clip epsilon 0.2 both ways, one optimisation pass
(num_iterations=1), beta=0 (no reference model), per-sequence token-mean loss (TRL
`loss_type="grpo"`; its default is "dapo"), group-std advantages (`scale_rewards="group"`),
token-level importance ratios (`importance_sampling_level="token"`), truncated completions
trained on (`mask_truncated_completions=False`, our `overlong_filter` off), no gradient
checkpointing (TRL turns it on by default), no vLLM, same micro-batch, same torch threads.
Precision: float32 is TRL `bf16=False` and our `optim.precision="float32"`; bfloat16 is TRL
`bf16=True` (its default: autocast over float32 weights) and our `optim.precision="bfloat16"`.
Our optimisation options (`optim.logprob_chunk_mib`, `optim.micro_batching`, ...) keep the
spec's defaults unless `--ours-optim '{"key": value}'` sets them.

TRL's `use_liger_kernel` stays off: Liger's kernels are Triton kernels, and Triton has no CPU
backend here (`LigerFusedLinearCrossEntropyLoss` on CPU tensors fails with "0 active drivers
([]). There should only be one."). TRL 1.16 applies only Liger's layer kernels anyway (RMSNorm,
RoPE, SwiGLU); its chunked log-probability head (`add_fused_lm_head`: the full logits never
exist) is always on and is plain torch, so TRL's memory figure includes it.

Every round runs each side in a fresh subprocess (ours, then TRL), so the peak resident set
(`VmHWM`) is that side's alone (imports, model, optimiser, activations); the first step of
each round is a warm-up that is not counted.

Device: both sides use CUDA when torch sees it (ours through the loop's own choice, TRL with
`use_cpu=False`), else the CPU. On CUDA the peak memory compared is the process's
`torch.cuda.max_memory_allocated` (our loop resets that gauge every step for its
`perf/gpu_mem_peak_gb` metric; the bench turns the reset off so both read the whole process's
peak, TRL's memory tracker stays off with `skip_memory_metrics`), peak RSS is printed beside it,
and step times end on `torch.cuda.synchronize()`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INSTALL_HINT = 'TRL is needed for this benchmark only: pip install "trl==1.16.0"'
QUESTIONS = [
    "What is 12 + 7?",
    "Repeat the letter: k",
    "What is 3 + 45?",
    "Say yes or no: is ten more than two?",
    "Count to five.",
    "Repeat the letter: q",
    "What is 60 + 9?",
    "Write the word seven.",
]
CHAT_QUESTIONS = [  # the pretrained case's prompts: a chat model's kind of question, short and long answers
    "What is the capital of France?",
    "Explain in two sentences why the sky is blue.",
    "What is 17 times 3?",
    "Give me three tips for sleeping better.",
    "Translate 'good morning' into Spanish.",
    "Write a haiku about the sea.",
    "What is the boiling point of water in Fahrenheit?",
    "Name two planets larger than Earth.",
]
REAL_VOCAB = 151_936  # Qwen2/2.5/3's vocabulary size
REAL_DIMS = {"hidden": 512, "layers": 4, "heads": 8, "intermediate": 1536}
PHASES = ("timing/generate_s", "timing/score_s", "timing/old_ref_s", "timing/train_s", "cpu/generate_s")


@dataclass
class Case:
    """One row of the table: a model, a length regime and a batch shape."""

    size: str  # "tiny", "small" (trainers.demos.tiny), "real" or "pretrained"
    kind: str  # "fixed", "eos", "real" (real shapes, random model) or "pretrained" (real pretrained model)
    prompts: int
    group_size: int
    max_new_tokens: int
    micro_batch: int
    steps: int  # counted steps per round

    @property
    def name(self) -> str:
        if self.kind == "pretrained":
            return "pretrained"
        return "real shapes" if self.kind == "real" else f"{self.size} {self.kind}"


def write_dataset(path: Path, n_prompts: int, questions: list[str] = QUESTIONS) -> Path:
    rows = [{"prompt": questions[i % len(questions)], "answer": "a"} for i in range(n_prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_spec(
    model_dir: Path, data_path: Path, out_dir: Path, case: Case, precision: str, ours_optim: dict,
    ours_model: dict | None = None,
) -> dict:  # fmt: skip
    """Our RunSpec (as JSON) for a case; validated in the worker, where the spec's fields are known."""
    optim = {
        "lr": 1e-5,
        "prompts_per_step": case.prompts,
        "micro_batch_size": case.micro_batch,
        "total_steps": 10_000,
        "max_grad_norm": 1.0,
        "seed": 0,
        **ours_optim,
    }
    from trainers.spec import OptimSpec

    if "precision" in OptimSpec.model_fields or precision != "float32":
        optim["precision"] = precision  # without the field, float32 is today's only precision
    return {
        "name": "bench",
        "model": {"path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False, **(ours_model or {})},
        "data": {"path": str(data_path), "shuffle": False},
        "rubric": {"criteria": [{"name": "has_a", "kind": "contains", "params": {"keywords": ["a", "e"]}}]},
        "algorithm": {
            "group_size": case.group_size,
            "advantage_estimator": "grpo",
            "policy_loss": "ppo_clip",
            "loss_agg_mode": "seq-mean-token-mean",
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.2,
            "kl_beta": 0.0,
            "ppo_epochs": 1,
            "overlong_filter": False,
        },
        "rollout": {
            "engine": "transformers",
            "max_new_tokens": case.max_new_tokens,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": 0,
            "generation_batch_size": case.prompts * case.group_size,
        },
        "optim": optim,
        "checkpoint": {"output_dir": str(out_dir), "save_final": False},
    }


def rss_mb(field: str = "VmRSS") -> float:
    """Resident set now (VmRSS) or its peak (VmHWM), MiB. Not `ru_maxrss`: Linux keeps that across
    exec, so a worker would report its parent's peak when the parent's was higher."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cuda_mb() -> float | None:
    """CUDA memory allocated now, MiB (None on a CPU)."""
    import torch

    return torch.cuda.memory_allocated() / 2**20 if torch.cuda.is_available() else None


# --- ours ------------------------------------------------------------------------------------


def run_ours(job: dict) -> dict:
    """Times, phases and lengths of `job["steps"]` steps of a fresh trainer, warm-up included."""
    import torch

    from trainers.report import MemoryReporter
    from trainers.run.loop import Trainer
    from trainers.spec import RunSpec

    cuda = torch.cuda.is_available()
    if cuda:  # the loop resets the gauge every step (its per-step metric): keep the process's peak, as TRL's
        torch.cuda.reset_peak_memory_stats = lambda *a, **kw: None
    spec = RunSpec.model_validate(job["spec"])
    trainer = Trainer(spec, MemoryReporter())
    start_rss, start_cuda = rss_mb(), cuda_mb()
    if job["fixed_length"]:
        trainer.engine.eos_ids = [-1]  # never sampled: every completion runs to max_new_tokens
    generate = trainer.engine.generate
    gen_cpu = [0.0]

    def timed_generate(*a, **kw):  # the loop times phases on the wall clock; the CPU split is taken here
        c0 = time.process_time()
        try:
            return generate(*a, **kw)
        finally:
            gen_cpu[0] += time.process_time() - c0

    trainer.engine.generate = timed_generate
    memory = None
    if job.get("memory_phases"):
        from bench.phase_memory import instrument

        memory = instrument(trainer)
    times, phases, lengths, prompts = [], [], [], []
    try:
        for _ in range(job["steps"]):
            t0, c0 = time.perf_counter(), time.process_time()
            gen_cpu[0] = 0.0
            record = trainer.step()
            metrics = record.metrics | {"cpu/generate_s": gen_cpu[0]}
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t0, time.process_time() - c0))
            phases.append({k: metrics.get(k, float("nan")) for k in PHASES})
            episodes = [ep for grp in record.generated for ep in grp.episodes]
            lengths.append([len(ep.completion_ids) for ep in episodes])
            if not prompts:  # the first step's prompts, as token ids (compared with TRL's)
                prompts = sorted({tuple(ep.prompt_ids) for ep in episodes})
    finally:
        if memory is not None:
            memory.stop()
        trainer.close()
    return {
        "times": times,
        "phases": phases,
        "lengths": lengths,
        "start_rss_mb": start_rss,
        "start_cuda_mb": start_cuda,
        "prompt_ids": prompts,
        "memory_phases": memory.peaks if memory is not None else None,
    }


# --- TRL -------------------------------------------------------------------------------------


def run_trl(job: dict) -> dict:
    """Times and completion lengths of `job["steps"]` optimiser steps of a fresh GRPOTrainer."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainers.rewards.rubric import Rubric
    from trainers.rewards.sample import Sample
    from trainers.spec import RubricSpec

    spec = job["spec"]
    rubric = Rubric.from_spec(RubricSpec.model_validate(spec["rubric"]))

    def rubric_reward(prompts, completions, answer, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        samples = [
            Sample(prompt=p, completion=t, fields={"answer": a}) for p, t, a in zip(prompts, texts, answer, strict=True)
        ]
        return [r.reward for r in rubric.score(samples)]

    rows = [json.loads(line) for line in Path(spec["data"]["path"]).read_text().splitlines()]
    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["prompt"]}], "answer": r["answer"]} for r in rows]
    )
    optim, algo, rollout = spec["optim"], spec["algorithm"], spec["rollout"]
    total = optim["prompts_per_step"] * algo["group_size"]
    config = GRPOConfig(
        output_dir=job["out_dir"],
        max_steps=job["steps"],
        learning_rate=optim["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        max_grad_norm=optim["max_grad_norm"],
        per_device_train_batch_size=optim["micro_batch_size"],
        gradient_accumulation_steps=total // optim["micro_batch_size"],
        num_generations=algo["group_size"],
        max_completion_length=rollout["max_new_tokens"],
        temperature=rollout["temperature"],
        top_p=rollout["top_p"],
        top_k=0,
        generation_kwargs={"min_new_tokens": rollout["max_new_tokens"]} if job["fixed_length"] else None,
        beta=0.0,
        epsilon=algo["clip_ratio_low"],
        epsilon_high=algo["clip_ratio_high"],
        num_iterations=1,
        loss_type="grpo",
        scale_rewards="group",
        importance_sampling_level="token",
        mask_truncated_completions=False,
        gradient_checkpointing=False,
        bf16=job["precision"] == "bfloat16",
        fp16=False,
        use_liger_kernel=False,  # Triton kernels: no CPU backend (module docstring)
        use_cpu=not torch.cuda.is_available(),
        use_vllm=False,
        shuffle_dataset=False,
        save_strategy="no",
        report_to="none",
        logging_steps=10_000,
        disable_tqdm=True,
        seed=optim["seed"],
        dataloader_num_workers=0,
        skip_memory_metrics=True,  # its tracker resets the CUDA peak gauge
    )

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.starts: list[tuple[float, float]] = []
            self.ends: list[tuple[float, float]] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.starts.append((time.perf_counter(), time.process_time()))

        def on_step_end(self, args, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.ends.append((time.perf_counter(), time.process_time()))

    timer = StepTimer()
    model = AutoModelForCausalLM.from_pretrained(job["model_dir"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(job["model_dir"])
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # TRL hands every tokenizer output to generate
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rubric_reward,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    start_rss, start_cuda = rss_mb(), cuda_mb()
    lengths: list[list[int]] = []
    prompts: list[tuple[int, ...]] = []
    original = trainer._generate_and_score_completions

    def counting(inputs):  # record how many tokens each completion got (and the first step's prompt ids)
        out = original(inputs)
        lengths.append([int(n) for n in out["completion_mask"].sum(-1).tolist()])
        if not prompts:
            ids, mask = out["prompt_ids"].cpu(), out["prompt_mask"].cpu().bool()
            prompts.extend(sorted({tuple(row[m].tolist()) for row, m in zip(ids, mask, strict=True)}))
        return out

    trainer._generate_and_score_completions = counting
    trainer.train()
    rubric.close()
    # on_step_begin fires at the first micro-batch of the accumulation window, which is when
    # TRL generates the whole window's completions: begin -> end is the full GRPO step.
    times = [(e[0] - s[0], e[1] - s[1]) for s, e in zip(timer.starts, timer.ends, strict=True)]
    return {
        "times": times,
        "lengths": lengths,
        "start_rss_mb": start_rss,
        "start_cuda_mb": start_cuda,
        "prompt_ids": prompts,
    }


def worker(job_path: Path) -> int:
    """One side, one round, in this (fresh) process: the job's result JSON goes next to the job."""
    import torch

    job = json.loads(job_path.read_text())
    torch.set_num_threads(job["threads"])
    result = run_ours(job) if job["side"] == "ours" else run_trl(job)
    result["peak_rss_mb"] = rss_mb("VmHWM")
    if torch.cuda.is_available():
        result["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    job_path.with_suffix(".result.json").write_text(json.dumps(result))
    return 0


# --- the models' edits ------------------------------------------------------------------------


def secant(f, target: float, lo: float = 0.0, hi: float = 1.0, steps: int = 8) -> float:
    """x with f(x) about `target` (f monotone near the answer), by a few secant steps."""
    f_lo, f_hi = f(lo), f(hi)
    for _ in range(steps):
        if abs(f_hi - target) < 1e-3 or f_hi == f_lo:
            break
        x = hi + (target - f_hi) * (hi - lo) / (f_hi - f_lo)
        lo, f_lo, hi, f_hi = hi, f_hi, x, f(x)
    return hi


def make_eos_likely(model_dir: Path, eos_prob: float) -> None:
    """Edit the saved model so that it samples EOS with probability about `eos_prob` per token
    (see the module docstring): embedding column 0 becomes a constant that dominates the
    residual stream, so after the final RMSNorm it is about the same at every position, and
    the tied EOS row gets more in that column: as much as makes EOS's mean probability over
    random token sequences `eos_prob`."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert model.config.tie_word_embeddings, "the edit relies on tied input/output embeddings"
    eos, vocab = model.config.eos_token_id, model.config.vocab_size
    emb = model.get_input_embeddings().weight
    probe = torch.randint(0, vocab, (8, 64), generator=torch.Generator().manual_seed(0))

    def log_odds(extra: float) -> float:
        with torch.no_grad():
            emb[:, 0] = 4.0
            emb[eos, 0] += extra
            p = model(probe).logits.softmax(-1)[..., eos].mean().item()
        return math.log(p / (1 - p))

    secant(log_odds, math.log(eos_prob / (1 - eos_prob)))
    model.save_pretrained(model_dir)


def make_lengths_skewed(model_dir: Path, short_frac: float, short_len: int, n_tokens: int) -> dict[str, float]:
    """Edit the saved model so that completions are either short (about `short_len` tokens) or run
    to the length limit, about `short_frac` of them short, as with a model that answers some
    prompts at once and rambles on others.

    Tied embeddings make the random model close to a bigram model: the residual stream is mostly
    the input token's embedding, and the next token's logit is that (normalised) vector dotted with
    the candidate's embedding. Three columns are set: column 0 is 4 for the tokenizer's `n_tokens`
    real ids and 0 for the rest of the vocabulary (those ids are never sampled; the LM head still
    computes all of them); column 1 is +2 for the "short" class of ordinary tokens and -2 for the
    "long" class, so a token's class repeats (the other class's logits are ~50 lower); column 2 is
    +1 / -1 by class, and the EOS row gets as much there as makes EOS follow a short token with
    probability 1 / `short_len` (and a long one almost never). The first token after the prompt
    sees no class, so it opens the short class with probability about `short_frac`. For that the
    layers' outputs (which shift the logits by a few units, the same way for every sample of a
    prompt) are scaled down 20 times: the arithmetic per token is unchanged."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.tie_word_embeddings, "the edit relies on tied input/output embeddings"
    eos = model.config.eos_token_id
    special = set(tokenizer.all_special_ids)
    ordinary = [i for i in range(n_tokens) if i not in special]
    cut = round(len(ordinary) * short_frac)
    short, long = torch.tensor(ordinary[:cut]), torch.tensor(ordinary[cut:])
    emb = model.get_input_embeddings().weight
    gen = torch.Generator().manual_seed(0)
    probe_short = short[torch.randint(0, len(short), (8, 48), generator=gen)]
    probe_long = long[torch.randint(0, len(long), (8, 48), generator=gen)]

    def eos_prob(probe: torch.Tensor) -> float:
        with torch.no_grad():
            return model(probe).logits[..., -1, :].float().softmax(-1)[..., eos].mean().item()

    with torch.no_grad():  # the layers' share of the residual stream is per-prompt noise in the logits
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.05)
            layer.mlp.down_proj.weight.mul_(0.05)

    def log_odds(extra: float) -> float:
        with torch.no_grad():
            emb[:, :3] = 0.0
            emb[:n_tokens, 0] = 4.0
            emb[short, 1], emb[long, 1] = 2.0, -2.0
            emb[short, 2], emb[long, 2] = 1.0, -1.0
            emb[eos, 2] = extra
        p = eos_prob(probe_short)
        return math.log(p / (1 - p))

    target = 1 / short_len
    secant(log_odds, math.log(target / (1 - target)), lo=0.0, hi=4.0)
    with torch.no_grad():
        logits = model(probe_short[:2]).logits[..., -1, :].float().softmax(-1)
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
                   for q in QUESTIONS[:4]]  # fmt: skip
        first = [model(torch.tensor([ids["input_ids"]])).logits[0, -1].float().softmax(-1) for ids in prompts]
    stats = {
        "first_short": statistics.mean(p[short].sum().item() for p in first),
        "first_short_min": min(p[short].sum().item() for p in first),
        "eos_after_short": eos_prob(probe_short),
        "eos_after_long": eos_prob(probe_long),
        "short_to_long": logits[:, long].sum(-1).mean().item(),
    }
    model.save_pretrained(model_dir)
    return stats


def build_case_model(case: Case, work: Path, eos_prob: float, pretrained: Path | None = None) -> Path:
    """The case's model folder, built once and shared by both precisions and both sides (the
    pretrained case's is `pretrained`, as installed: never edited)."""
    from trainers.demos.tiny import build_tiny_model

    if case.kind == "pretrained":
        assert pretrained is not None, "main resolves the pretrained model's folder"
        return pretrained
    model_dir = work / f"model-{case.size}-{case.kind}"
    if model_dir.exists():
        return model_dir
    if case.kind != "real":
        build_tiny_model(model_dir, size=case.size, seed=0)
        if case.kind == "eos":
            make_eos_likely(model_dir, eos_prob)
        return model_dir
    import torch
    from transformers import AutoModelForCausalLM

    build_tiny_model(model_dir, seed=0, **REAL_DIMS)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    n_tokens = model.config.vocab_size
    torch.manual_seed(0)
    model.resize_token_embeddings(REAL_VOCAB, mean_resizing=False)  # ids past the tokenizer's: N(0, 0.02) rows
    model.save_pretrained(model_dir)
    stats = make_lengths_skewed(model_dir, short_frac=0.85, short_len=16, n_tokens=n_tokens)
    print(
        "  real-shapes edit: P(first token short) {first_short:.2f} (lowest prompt {first_short_min:.2f}), "
        "P(EOS | short-class token) {eos_after_short:.3f}, P(EOS | long-class token) "
        "{eos_after_long:.1e}, P(class switch) {short_to_long:.1e}".format(**stats)
    )
    return model_dir


# --- driver ----------------------------------------------------------------------------------


def run_side(side: str, job: dict, work: Path, tag: str) -> dict:
    """Run one side in a fresh interpreter (its own peak RSS); its stderr tail on failure."""
    job_path = work / f"job-{tag}-{side}.json"
    job_path.write_text(json.dumps({**job, "side": side, "out_dir": str(work / f"out-{tag}-{side}")}))
    env = {**os.environ, "OMP_NUM_THREADS": str(job["threads"]), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", str(job_path)], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["exit " + str(proc.returncode)]}
    return json.loads(job_path.with_suffix(".result.json").read_text())


def length_summary(lengths: list[list[int]]) -> str:
    flat = sorted(n for step in lengths for n in step)
    if not flat:
        return "no completions"
    q = lambda f: flat[min(len(flat) - 1, int(f * len(flat)))]  # noqa: E731
    return f"mean {statistics.mean(flat):.1f}, min {flat[0]}, median {q(0.5)}, p90 {q(0.9)}, max {flat[-1]}"


def memory_of(out: dict) -> float:
    """A side's peak memory, MiB: CUDA's max_memory_allocated on a GPU, else peak RSS."""
    return out["peak_cuda_mb"] if out.get("peak_cuda_mb") is not None else out["peak_rss_mb"]


def prompts_note(prompt_ids: dict[str, list]) -> str:
    """Whether both sides' first steps saw the same prompt token ids."""
    if len(prompt_ids) < 2:
        return ""
    ours, trl = ({tuple(p) for p in ids} for ids in prompt_ids.values())
    sizes = sorted(len(p) for p in ours)
    if ours == trl:
        return f"same prompt token ids on both sides ({len(ours)} prompts of {sizes[0]}-{sizes[-1]} tokens)"
    return f"PROMPT TOKEN IDS DIFFER: ours {len(ours)} prompts, TRL {len(trl)}, {len(ours & trl)} shared"


def bench_case(case: Case, precision: str, args: argparse.Namespace, work: Path) -> dict:
    model_dir = build_case_model(case, work, args.eos_prob, args.pretrained_dir)
    if case.kind == "pretrained":
        data = write_dataset(work / f"data-chat-{case.prompts}.jsonl", case.prompts, CHAT_QUESTIONS)
    else:
        data = write_dataset(work / f"data-{case.prompts}.jsonl", case.prompts)
    tag = f"{case.size}-{case.kind}-{precision}"
    spec = make_spec(model_dir, data, work / f"ours-{tag}", case, precision, args.ours_optim, args.ours_model)
    if case.kind == "fixed":
        lengths_note = f"x {case.max_new_tokens} new tokens"
    elif case.kind == "pretrained":
        lengths_note = f"x up to {case.max_new_tokens} tokens, ending at the model's own EOS; chat prompts"
    else:
        lengths_note = f"x up to {case.max_new_tokens} tokens, ending at EOS"
    print(
        f"\n== {case.name}, {precision}: {args.params[case.size] / 1e6:.1f} M parameters, {case.prompts} prompts x "
        f"{case.group_size} completions {lengths_note}, micro-batch {case.micro_batch}, {args.threads} threads, "
        f"{args.device} =="
    )
    job = {
        "spec": spec,
        "model_dir": str(model_dir),
        "steps": case.steps + 1,
        "fixed_length": case.kind == "fixed",
        "precision": precision,
        "threads": args.threads,
        "memory_phases": args.memory_phases,
    }
    sides: dict[str, dict] = {
        side: {"times": [], "lengths": [], "peak": [], "rss": [], "start": [], "phases": []} for side in args.sides
    }
    prompt_ids: dict[str, list] = {}
    for r in range(args.rounds):
        for side in args.sides:
            out = run_side(side, job, work, f"{tag}-{r}")
            if "error" in out:
                print(f"  round {r + 1} {side}: FAILED: {out['error'][0]}")
                continue
            acc = sides[side]
            acc["times"] += out["times"][1:]
            acc["lengths"] += out["lengths"][1:]
            acc["peak"].append(memory_of(out))
            acc["rss"].append(out["peak_rss_mb"])
            acc["start"].append(out["start_rss_mb"])
            acc["phases"] += out.get("phases", [])[1:]
            prompt_ids.setdefault(side, out.get("prompt_ids", []))
            if out.get("peak_cuda_mb") is not None:
                memory = (
                    f"peak CUDA {out['peak_cuda_mb']:,.0f} MiB (after loading {out['start_cuda_mb']:,.0f}), "
                    f"peak RSS {out['peak_rss_mb']:,.0f} MiB"
                )
            else:
                memory = f"peak RSS {out['peak_rss_mb']:,.0f} MiB (after loading {out['start_rss_mb']:,.0f})"
            print(
                f"  round {r + 1} {side:>4}: {fmt(out['times'][1:])}; {memory}; "
                f"tokens/completion {length_summary(out['lengths'][1:])}"
            )
            if out.get("memory_phases"):
                from bench.phase_memory import table

                print(f"  round {r + 1} ours, peak memory by phase (every step, warm-up included):")
                print(table(out["memory_phases"]))
    result = {"case": case.name, "precision": precision, "device": args.device}
    for side, acc in sides.items():
        if not acc["times"]:
            continue
        tokens = sum(n for step in acc["lengths"] for n in step)
        result[side] = {
            "wall_s": statistics.median(t[0] for t in acc["times"]),
            "cpu_s": statistics.median(t[1] for t in acc["times"]),
            "peak_mb": max(acc["peak"]),  # CUDA max_memory_allocated on a GPU, else peak RSS
            "peak_rss_mb": max(acc["rss"]),
            "mean_tokens": statistics.mean(n for step in acc["lengths"] for n in step),
            "wall_tokens_per_s": tokens / sum(t[0] for t in acc["times"]),  # completion tokens
            "cpu_tokens_per_s": tokens / sum(t[1] for t in acc["times"]),
        }
    if "ours" in sides and sides["ours"]["phases"]:
        med = {k: statistics.median(p[k] for p in sides["ours"]["phases"]) for k in PHASES}
        result["ours_phases"] = med
        print(
            f"  ours by phase (median wall s): generate {med['timing/generate_s']:.3f}, score "
            f"{med['timing/score_s']:.3f}, old/ref logprobs {med['timing/old_ref_s']:.3f}, train (passes) "
            f"{med['timing/train_s'] - med['timing/old_ref_s']:.3f}; generate CPU {med['cpu/generate_s']:.3f}"
        )
    note = prompts_note(prompt_ids)
    if note:
        result["same_prompts"] = not note.startswith("PROMPT")
        print(f"  {note}")
    if "ours" in result and "trl" in result:
        o, t = result["ours"], result["trl"]
        memory = "CUDA max allocated" if args.device == "cuda" else "peak RSS"
        print(
            f"  median of {len(sides['ours']['times'])}: wall ours {o['wall_s']:.3f} / TRL {t['wall_s']:.3f} s/step "
            f"= {o['wall_s'] / t['wall_s']:.2f}; CPU {o['cpu_s']:.3f} / {t['cpu_s']:.3f} = "
            f"{o['cpu_s'] / t['cpu_s']:.2f}; {memory} {o['peak_mb']:,.0f} / {t['peak_mb']:,.0f} MiB = "
            f"{o['peak_mb'] / t['peak_mb']:.2f}   (goal: <= 0.50)"
        )
        print(
            f"  completion tokens: mean {o['mean_tokens']:.1f} ours / {t['mean_tokens']:.1f} TRL per completion; "
            f"{o['wall_tokens_per_s']:,.1f} / {t['wall_tokens_per_s']:,.1f} tokens per wall s "
            f"({o['cpu_tokens_per_s']:,.1f} / {t['cpu_tokens_per_s']:,.1f} per CPU s): time per token ours / TRL "
            f"{t['wall_tokens_per_s'] / o['wall_tokens_per_s']:.2f} wall, "
            f"{t['cpu_tokens_per_s'] / o['cpu_tokens_per_s']:.2f} CPU"
        )
    return result


def fmt(times: list[tuple[float, float]]) -> str:
    return " ".join(f"{w:.2f}" for w, _ in times) + " s/step wall (" + " ".join(f"{c:.2f}" for _, c in times) + " CPU)"


def print_table(results: list[dict], clock: str) -> None:
    key = f"{clock}_s"
    rate = f"{clock}_tokens_per_s"
    device = results[0].get("device", "cpu") if results else "cpu"
    memory = "CUDA max_memory_allocated" if device == "cuda" else "peak resident memory"
    print(f"\nsummary ({clock} s/step, medians; {memory} MiB; completion tokens per {clock} s; ours / TRL):")
    print(f"{'case':<14} {'precision':<9} {'ours s':>8} {'TRL s':>8} {'ratio':>6} {'ours MiB':>9} {'TRL MiB':>9} "
          f"{'ratio':>6} {'tokens ours/TRL':>16} {'tok/s ours/TRL':>17} {'s/tok ratio':>11}")  # fmt: skip
    for r in results:
        o, t = r.get("ours"), r.get("trl")
        if o is None or t is None:
            missing = " and ".join(s for s in ("ours", "trl") if s not in r)
            print(f"{r['case']:<14} {r['precision']:<9} (no {missing} result: not run, or failed above)")
            continue
        print(
            f"{r['case']:<14} {r['precision']:<9} {o[key]:>8.2f} {t[key]:>8.2f} {o[key] / t[key]:>6.2f} "
            f"{o['peak_mb']:>9,.0f} {t['peak_mb']:>9,.0f} {o['peak_mb'] / t['peak_mb']:>6.2f} "
            f"{o['mean_tokens']:>7.1f}/{t['mean_tokens']:<7.1f} {o[rate]:>8.1f}/{t[rate]:<8.1f} "
            f"{t[rate] / o[rate]:>11.2f}"
        )


def plan(args: argparse.Namespace) -> list[Case]:
    cases = []
    for kind in args.cases.split(","):
        if kind == "real":
            cases.append(Case("real", "real", 4, 8, args.real_max_new_tokens, args.real_micro_batch, args.real_steps))
            continue
        if kind == "pretrained":
            prompts, group = (2, 2) if args.quick else (args.prompts, args.group_size)
            micro = min(args.micro_batch, prompts * group)  # a step of fewer sequences is one micro-batch
            tokens = 16 if args.quick else args.pretrained_max_new_tokens
            cases.append(Case("pretrained", "pretrained", prompts, group, tokens, micro, args.pretrained_steps))
            continue
        for size in args.sizes.split(","):
            cases.append(
                Case(size, kind, args.prompts, args.group_size, args.max_new_tokens, args.micro_batch, args.steps)
            )
    return cases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: run one side of one round
    p.add_argument(
        "--quick",
        action="store_true",
        help="debug run: tiny model, 1 round of 1 step, real case at 64 tokens, "
        "pretrained case at 2 prompts x 2 completions of up to 16 tokens",
    )
    p.add_argument("--sizes", default="tiny,small", help="comma-separated trainers.demos.tiny sizes for fixed/eos")
    p.add_argument(
        "--cases",
        default="fixed,eos,real,pretrained",
        help="comma-separated: fixed, eos, real (real shapes, random model), pretrained (real pretrained model)",
    )
    p.add_argument("--precisions", default="float32,bfloat16", help="comma-separated: float32, bfloat16")
    p.add_argument("--eos-prob", type=float, default=0.03, help="per-token EOS probability in the eos case")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=16, help="sequences per forward/backward in both")
    p.add_argument("--real-max-new-tokens", type=int, default=512)
    p.add_argument("--real-micro-batch", type=int, default=8)
    p.add_argument("--real-steps", type=int, default=1, help="counted steps per round in the real-shapes case")
    p.add_argument("--model", type=Path, help="pretrained case: this transformers folder instead of SmolLM2-135M")
    p.add_argument(
        "--models-dir",
        type=Path,
        default=Path(os.environ.get("STUDIO_DATA_DIR", ROOT / "var")) / "demo",
        help="pretrained case: where SmolLM2-135M-Instruct is (or is converted once from its package)",
    )
    p.add_argument("--pretrained-max-new-tokens", type=int, default=128)
    p.add_argument("--pretrained-steps", type=int, default=2, help="counted steps per round in the pretrained case")
    p.add_argument("--rounds", type=int, default=2, help="alternations of ours and TRL")
    p.add_argument("--steps", type=int, default=3, help="counted steps per round (after one warm-up step)")
    p.add_argument("--threads", type=int, default=2, help="torch threads for both")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="which clock the summary table uses")
    p.add_argument("--ours-optim", type=json.loads, default={}, help="JSON merged into our optim section")
    p.add_argument(
        "--ours-model",
        type=json.loads,
        default={},
        help="JSON merged into our model section, e.g. '{\"gradient_checkpointing\": true}' (TRL's stays off)",
    )
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument(
        "--memory-phases",
        action="store_true",
        help="ours: sample the resident set and malloc's bytes in use per phase of the step (bench/phase_memory.py)",
    )
    p.add_argument(
        "--sides",
        default="ours,trl",
        help="comma-separated: ours, trl (one side alone: no ratio, e.g. to re-measure ours)",
    )
    args = p.parse_args(argv)
    args.sides = [side for side in ("ours", "trl") if side in args.sides.split(",")]
    if args.worker:
        return worker(args.worker)
    if args.quick:
        args.sizes, args.rounds, args.steps, args.real_steps, args.real_max_new_tokens = "tiny", 1, 1, 1, 64
        args.pretrained_steps = 1

    try:
        import trl

        trl_version = trl.__version__
    except ImportError:
        if "trl" in args.sides:
            print(INSTALL_HINT, file=sys.stderr)
            return 2
        trl_version = "not installed"
    import torch
    import transformers

    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl_version}, "
          f"device {args.device}{gpu}, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    cases = plan(args)
    args.pretrained_dir, skipped = None, False
    if any(case.kind == "pretrained" for case in cases):
        from trainers.models.pretrained import SMOLLM2, PretrainedError, install

        try:
            args.pretrained_dir = args.model.resolve() if args.model else install(SMOLLM2, args.models_dir)
        except PretrainedError as exc:
            print(f"pretrained case skipped: {exc} (./studioctl setup installs it; or --model PATH)", file=sys.stderr)
            cases, skipped = [case for case in cases if case.kind != "pretrained"], True
        else:
            print(f"pretrained model: {args.pretrained_dir}")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as tmp:
        work = Path(tmp)
        args.params = {}
        for case in cases:
            from transformers import AutoModelForCausalLM

            from trainers.demos.tiny import count_parameters

            model_dir = build_case_model(case, work, args.eos_prob, args.pretrained_dir)
            args.params[case.size] = count_parameters(AutoModelForCausalLM.from_pretrained(model_dir))
        for precision in args.precisions.split(","):
            for case in cases:
                results.append(bench_case(case, precision, args, work))
    print_table(results, args.clock)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if skipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
