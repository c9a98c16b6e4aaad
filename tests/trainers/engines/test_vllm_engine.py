"""The vLLM engine. CPU tests cover everything around vLLM (spec -> arguments, output
conversion, the sleep/wake/weight-load sequence, the separate-server mode against a
stand-in server); tests marked `gpu` run the real vLLM and skip without CUDA + vLLM."""

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.engines.base import EngineUnavailable, SamplingParams, create_engine
from trainers.engines.vllm_engine import (
    WORKER_EXTENSION,
    ColocatedVLLM,
    VLLMEngine,
    engine_kwargs,
    supported_kwargs,
    to_generation,
    vllm_available,
)
from trainers.spec import RunSpec

from .fake_vllm_server import FakeVLLMServer

NEEDS_GPU = pytest.mark.skipif(
    not (torch.cuda.is_available() and vllm_available()),
    reason="needs a CUDA GPU and vLLM installed (pip install vllm); none here",
)


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


def test_engine_kwargs_come_from_the_spec(tmp_path):
    kwargs = engine_kwargs(make_spec(tmp_path, vllm_gpu_memory_utilization=0.4, vllm_sleep_during_update=False))
    assert kwargs["model"] == str(tmp_path)
    assert kwargs["gpu_memory_utilization"] == 0.4
    assert kwargs["enable_sleep_mode"] is False
    assert kwargs["max_model_len"] == 128  # prompt 100 + 28 new tokens
    assert kwargs["seed"] == 3
    assert kwargs["dtype"] == "float32"
    assert kwargs["worker_extension_cls"] == WORKER_EXTENSION
    assert "distributed_executor_backend" not in kwargs


def test_each_torchrun_rank_gets_its_own_in_process_vllm(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert engine_kwargs(make_spec(tmp_path))["distributed_executor_backend"] == "external_launcher"


def test_arguments_an_older_vllm_does_not_know_are_dropped():
    assert supported_kwargs({"model": "m", "logprobs_mode": "x"}, known={"model", "seed"}) == {"model": "m"}


def test_without_a_gpu_the_colocated_engine_says_it_cannot_run(tiny_model_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(EngineUnavailable, match="needs a CUDA GPU"):
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
    """Stand-in for vllm.LLM (cannot run without a GPU): records the calls the engine makes;
    its in-process model records the weights loaded into it."""

    def __init__(self, tagged_wake_up=True):
        self.calls = []
        self.loaded = {}
        self.tagged_wake_up = tagged_wake_up
        runner = SimpleNamespace(model=SimpleNamespace(load_weights=self._load))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
        )

    def _load(self, weights):
        self.calls.append("load_weights")
        self.loaded.update({name: t.clone() for name, t in weights})

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
    def sampling_params(self, params, n, seed):  # vllm.SamplingParams is not importable here
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


# --- separate server ---------------------------------------------------------------------


def test_a_server_engine_pushes_the_policy_before_the_first_generation_and_after_updates(
    tiny_model_path, tiny_tokenizer
):
    served = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    policy = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    with torch.no_grad():
        policy.model.norm.weight.fill_(0.25)  # the policy already differs from what the server loaded
    with FakeVLLMServer(served) as server:
        engine = create_engine(
            make_spec(tiny_model_path, vllm_server_url=server.url), model=policy, tokenizer=tiny_tokenizer
        )
        assert isinstance(engine, VLLMEngine)
        engine.generate([[5, 6]], 2, SamplingParams(max_new_tokens=4))
        assert torch.equal(served.model.norm.weight, policy.model.norm.weight)
        pushes_after_first = sum(r["path"] == "/collective_rpc" for r in server.requests)

        engine.generate([[5, 6]], 2, SamplingParams(max_new_tokens=4))  # no update: nothing to push
        assert sum(r["path"] == "/collective_rpc" for r in server.requests) == pushes_after_first

        with torch.no_grad():
            policy.model.norm.weight.fill_(2.0)
        engine.update_weights(policy)
        engine.generate([[5, 6]], 2, SamplingParams(max_new_tokens=4))
        assert torch.equal(served.model.norm.weight, policy.model.norm.weight)
        seeds = [r["body"]["seed"] for r in server.requests if r["path"] == "/v1/completions"]
        engine.close()
    assert len(set(seeds)) == 3  # every call samples fresh noise


def test_the_seed_position_survives_a_resume(tiny_model_path):
    with FakeVLLMServer() as server:
        spec = make_spec(tiny_model_path, vllm_server_url=server.url)
        engine = VLLMEngine(spec, model=None)
        engine.generate([[1]], 1, SamplingParams())
        resumed = VLLMEngine(spec, model=None)
        resumed.load_state_dict(engine.state_dict())
        engine.generate([[1]], 1, SamplingParams())
        resumed.generate([[1]], 1, SamplingParams())
    seeds = [r["body"]["seed"] for r in server.requests]
    assert seeds[1] == seeds[2] != seeds[0]


def test_per_prompt_seeds_never_repeat_across_calls_of_any_size_nor_across_ranks(tiny_model_path, monkeypatch):
    with FakeVLLMServer() as server:
        spec = make_spec(tiny_model_path, vllm_server_url=server.url)
        engine = VLLMEngine(spec, model=None)
        # Dynamic sampling draws rounds of different sizes; the backend seeds prompt i with first + i.
        firsts = [engine.next_seed(k) for k in (3, 1, 2, 3)]
        per_prompt = [f + i for f, k in zip(firsts, (3, 1, 2, 3), strict=True) for i in range(k)]
        assert len(set(per_prompt)) == len(per_prompt) == 9
        monkeypatch.setenv("RANK", "1")
        other_rank = VLLMEngine(spec, model=None)
        assert not {other_rank.next_seed(3) + i for i in range(3)} & set(per_prompt)


# --- real vLLM on a GPU ------------------------------------------------------------------


@pytest.fixture
def gpu_policy(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path).cuda()


def vllm_engine(tiny_model_path, policy, tokenizer, **rollout):
    spec = make_spec(tiny_model_path, vllm_gpu_memory_utilization=0.15, **rollout)
    return create_engine(spec, model=policy, tokenizer=tokenizer)


def trainer_logprobs(policy, prompts, groups, pad_id, temperature=1.0):
    from trainers.logprobs import TokenBatch, batched_logprobs

    flat = [g for group in groups for g in group]
    flat_prompts = [p for p, group in zip(prompts, groups, strict=True) for _ in group]
    batch = TokenBatch.build(flat_prompts, [g.token_ids for g in flat], pad_id=pad_id, device="cuda")
    logp, _ = batched_logprobs(policy, batch, micro_batch_size=64, temperature=temperature)
    engine_logp = torch.zeros_like(logp)
    for i, g in enumerate(flat):
        engine_logp[i, : len(g.logprobs)] = torch.tensor(g.logprobs)
    return engine_logp, logp, batch.completion_mask


@pytest.mark.gpu
@NEEDS_GPU
def test_vllm_samples_with_logprobs_that_match_the_trainers(tiny_model_path, tiny_tokenizer, gpu_policy):
    from trainers.engines.mismatch import logprob_gap

    prompts = [tiny_tokenizer.encode("What is 2 + 2?"), tiny_tokenizer.encode("Repeat the letter: k")]
    engine = vllm_engine(tiny_model_path, gpu_policy, tiny_tokenizer)
    try:
        groups = engine.generate(prompts, 4, SamplingParams(max_new_tokens=16, temperature=0.8, logprobs=True))
    finally:
        engine.close()
    assert [len(g) for g in groups] == [4, 4]
    for g in (g for group in groups for g in group):
        assert len(g.logprobs) == len(g.token_ids) <= 16
        assert g.finish_reason == ("length" if len(g.token_ids) == 16 else "stop")
    gap = logprob_gap(*trainer_logprobs(gpu_policy, prompts, groups, tiny_tokenizer.pad_token_id, temperature=0.8))
    assert gap["rollout/logprob_gap_mean"] < 1e-2, gap


@pytest.mark.gpu
@NEEDS_GPU
def test_updated_weights_reach_vllm_without_a_checkpoint(tiny_model_path, tiny_tokenizer, gpu_policy):
    prompts = [tiny_tokenizer.encode("What is 2 + 2?")]
    params = SamplingParams(max_new_tokens=12, logprobs=True)
    engine = vllm_engine(tiny_model_path, gpu_policy, tiny_tokenizer)
    try:
        engine.generate(prompts, 2, params)
        with torch.no_grad():
            for p in gpu_policy.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        engine.update_weights(gpu_policy)
        groups = engine.generate(prompts, 8, params)
    finally:
        engine.close()
    engine_logp, trainer_logp, mask = trainer_logprobs(gpu_policy, prompts, groups, tiny_tokenizer.pad_token_id)
    old = AutoModelForCausalLM.from_pretrained(tiny_model_path).cuda()
    _, old_logp, _ = trainer_logprobs(old, prompts, groups, tiny_tokenizer.pad_token_id)
    new_gap = ((engine_logp - trainer_logp).abs() * mask).sum() / mask.sum()
    old_gap = ((engine_logp - old_logp).abs() * mask).sum() / mask.sum()
    assert new_gap < 1e-2 < old_gap


@pytest.mark.gpu
@NEEDS_GPU
def test_a_lora_policy_is_sampled_with_its_adapters_merged(tiny_model_path, tiny_tokenizer, gpu_policy):
    from peft import LoraConfig, get_peft_model

    policy = get_peft_model(gpu_policy, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.2)
    prompts = [tiny_tokenizer.encode("What is 2 + 2?")]
    engine = vllm_engine(tiny_model_path, policy, tiny_tokenizer)
    try:
        groups = engine.generate(prompts, 8, SamplingParams(max_new_tokens=12, logprobs=True))
    finally:
        engine.close()
    engine_logp, trainer_logp, mask = trainer_logprobs(policy, prompts, groups, tiny_tokenizer.pad_token_id)
    assert ((engine_logp - trainer_logp).abs() * mask).sum() / mask.sum() < 1e-2


@pytest.mark.gpu
@NEEDS_GPU
def test_sleeping_between_generations_gives_the_memory_back(tiny_model_path, tiny_tokenizer, gpu_policy):
    engine = vllm_engine(tiny_model_path, gpu_policy, tiny_tokenizer)
    try:
        engine.sync_weights()
        free_awake, total = torch.cuda.mem_get_info()
        engine.generate([tiny_tokenizer.encode("hi")], 2, SamplingParams(max_new_tokens=4))  # sleeps after
        free_asleep, _ = torch.cuda.mem_get_info()
    finally:
        engine.close()
    # The KV cache (most of 15% of the GPU) is released while asleep.
    assert free_asleep - free_awake > 0.05 * total
