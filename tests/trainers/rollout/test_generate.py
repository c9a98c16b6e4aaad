"""Multi-turn episodes on the real engines (transformers; vLLM's CPU build) with the tiny model and
a test environment whose every step answers with a fixed tool message."""

from collections import defaultdict

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers import episode_envs
from trainers.data.prompts import Prompt, encode_chat
from trainers.data.rows import PromptRow
from trainers.rollout.engines.base import SamplingParams
from trainers.rollout.engines.catalog import create_engine
from trainers.rollout.engines.hf import HFEngine
from trainers.rollout.generate import engine_calls, generate_groups, run_episodes
from trainers.rollout.turn_tokens import observation_token_ids
from trainers.spec import EnvironmentSpec, RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import batched_logprobs
from trainers.update.micro_batching import MicroBatching

PARAMS = SamplingParams(max_new_tokens=64, temperature=1.0, logprobs=True)


def env(max_turns=4, max_episode_tokens=200, max_turn_tokens=8, **params) -> EnvironmentSpec:
    return EnvironmentSpec(
        kind="test-echo",
        params=params,
        max_turns=max_turns,
        max_episode_tokens=max_episode_tokens,
        max_turn_tokens=max_turn_tokens,
    )


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def engine(model, tiny_tokenizer):
    return HFEngine(model=model, tokenizer=tiny_tokenizer)


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    texts = ["Repeat the letter: k", "What is 2 + 2?"]
    return [
        Prompt(row=PromptRow(id=f"p{i}", row=i, prompt=t, fields={"answer": "k"}), text=t,
               token_ids=encode_chat(tiny_tokenizer, [{"role": "user", "content": t}])[1])
        for i, t in enumerate(texts)
    ]  # fmt: skip


def flat(groups):
    return [ep for group in groups for ep in group]


def test_episodes_alternate_sampled_turns_and_template_rendered_observations(engine, tiny_tokenizer, prompts, model):
    groups = run_episodes(engine, tiny_tokenizer, prompts, 3, PARAMS, env(turns=2))
    assert [len(g) for g in groups] == [3, 3]
    for ep in flat(groups):
        assert ep.end_reason == "done" and len(ep.turns) == 2 and ep.fields == {"answer": "k", "secret": 7}
        first, last = ep.turns
        assert 1 <= len(first.token_ids) <= 8 and first.observation == [{"role": "tool", "content": "result 7"}]
        assert first.observation_ids == observation_token_ids(tiny_tokenizer, first.observation, first.token_ids[-1])
        assert "<|tool|>result 7<|eos|><|assistant|>" in tiny_tokenizer.decode(first.observation_ids)
        assert last.observation_ids == [] and last.answered and last.reward == 0.5
        assert (first.state, last.state) == ("start", "after 1")
        assert ep.completion_ids == first.token_ids + first.observation_ids + last.token_ids
        assert ep.trained_mask == [1] * len(first.token_ids) + [0] * len(first.observation_ids) + [1] * len(
            last.token_ids
        )
        assert first.tool_calls[0].name == "echo" and ep.transcript()[1]["role"] == "tool"
    # Token ids as sampled: the engine's logprobs of each turn equal the trainer's over the whole
    # episode laid out as the loop trains it (prompt, sampled and observation tokens).
    assert sampled_token_gap(model, flat(groups), tiny_tokenizer.pad_token_id) < 1e-4


def sampled_token_gap(model, episodes, pad_id) -> float:
    """Mean |engine - trainer| logprob over sampled tokens, the trainer's read off one forward pass
    over each whole episode (observation tokens in the context, not compared)."""
    batch = TokenBatch.build([ep.prompt_ids for ep in episodes], [ep.completion_ids for ep in episodes], pad_id=pad_id)
    logp, _ = batched_logprobs(model, batch, micro_batching=MicroBatching(size=64))
    gaps = [
        abs(engine - trainer)
        for i, ep in enumerate(episodes)
        for engine, trainer, trained in zip(ep.engine_logprobs, logp[i].tolist(), ep.trained_mask, strict=False)
        if trained
    ]
    return sum(gaps) / len(gaps)


def test_the_turn_limit_and_the_token_budget_end_episodes(engine, tiny_tokenizer, prompts):
    for ep in flat(run_episodes(engine, tiny_tokenizer, prompts, 2, PARAMS, env(max_turns=3, turns=0))):
        if ep.end_reason != "turn_limit":  # only when the budget ran out first, which 200 tokens do not allow
            pytest.fail(f"ended {ep.end_reason}")
        assert len(ep.turns) == 3 and ep.turns[-1].observation_ids == []
    budget = env(max_turns=50, max_episode_tokens=20, max_turn_tokens=8, turns=0)
    for ep in flat(run_episodes(engine, tiny_tokenizer, prompts, 2, PARAMS, budget)):
        assert ep.end_reason == "token_budget"
        assert len(ep.completion_ids) <= 20 and all(len(t.token_ids) <= 8 for t in ep.turns)


def test_max_new_tokens_caps_each_turn_of_an_episode_as_the_environments_turn_limit_does(engine, tiny_tokenizer,
                                                                                         prompts):  # fmt: skip
    # trainers.spec.token_bounds: a turn samples at most min(max_new_tokens, max_turn_tokens), here min(3, 8).
    short = SamplingParams(max_new_tokens=3, temperature=1.0, logprobs=True)
    episodes = flat(run_episodes(engine, tiny_tokenizer, prompts, 2, short, env(max_turns=3, turns=0)))
    assert all(1 <= len(turn.token_ids) <= 3 for ep in episodes for turn in ep.turns)
    assert any(turn.finish_reason == "length" and len(turn.token_ids) == 3 for ep in episodes for turn in ep.turns)


def test_an_environment_that_raises_ends_its_episode_with_the_error_and_the_rest_go_on(engine, tiny_tokenizer, prompts):
    stepping = flat(run_episodes(engine, tiny_tokenizer, prompts, 2, PARAMS, env(fail_on="step")))
    assert all(ep.end_reason == "error" and len(ep.turns) == 1 for ep in stepping)
    assert "RuntimeError: step failed on purpose" in stepping[0].error
    resetting = flat(run_episodes(engine, tiny_tokenizer, prompts, 2, PARAMS, env(fail_on="reset")))
    assert all(ep.end_reason == "error" and ep.turns == [] and "reset failed" in ep.error for ep in resetting)


def test_each_environment_lives_on_one_thread_and_steps_run_concurrently(engine, tiny_tokenizer, prompts):
    episode_envs.Echo.calls.clear()
    timings = {}
    run_episodes(engine, tiny_tokenizer, prompts, 4, PARAMS, env(turns=2, sleep_s=0.2), timings)
    threads, methods = defaultdict(set), defaultdict(list)
    for env_id, method, thread in episode_envs.Echo.calls:
        threads[env_id].add(thread)
        methods[env_id].append(method)
    assert len(threads) == 8 and all(len(t) == 1 for t in threads.values())
    assert all(m == ["reset", "step", "step", "close"] for m in methods.values())
    assert len({t for ts in threads.values() for t in ts}) == 8  # a thread per episode
    # 8 episodes x 2 steps x 0.2 s = 3.2 s one after another; concurrently about 0.4 s.
    assert timings["tool"] < 1.6


def test_without_an_environment_an_episode_is_one_turn_with_the_same_tokens_as_before(engine, tiny_tokenizer, prompts):
    torch.manual_seed(5)
    direct = engine.generate([p.token_ids for p in prompts], 3, PARAMS)
    torch.manual_seed(5)
    groups = run_episodes(engine, tiny_tokenizer, prompts, 3, PARAMS, None)
    for gens, episodes in zip(direct, groups, strict=True):
        for g, ep in zip(gens, episodes, strict=True):
            assert len(ep.turns) == 1 and ep.completion_ids == g.token_ids and ep.final_text == g.text
            assert ep.end_reason == ("length" if g.finish_reason == "length" else "done")


def test_engine_calls_cut_large_groups_and_batch_pieces_of_one_size():
    assert engine_calls([4, 4, 4], None) == [(4, [0, 1, 2])]  # one call, as before per-prompt sizes
    assert engine_calls([2, 5, 2], None) == [(2, [0, 2]), (5, [1])]
    # chunk 4: 10 -> 4 + 4 + 2, 3 -> 3, 2 -> 2; pieces of 4 one a call, pieces of 2 two a call.
    assert engine_calls([10, 3, 2], 4) == [(4, [0]), (4, [0]), (2, [0, 2]), (3, [1])]


def test_groups_of_different_sizes_and_chunked_groups(engine, tiny_tokenizer, prompts):
    calls = []

    class Counting:  # the real engine, with each call's sequence count written down
        def generate(self, ids, n, params):
            calls.append(len(ids) * n)
            return engine.generate(ids, n, params)

    groups = generate_groups(Counting(), [p.token_ids for p in prompts], [5, 2], PARAMS, chunk=None)
    assert [len(g) for g in groups] == [5, 2] and calls == [5, 2]
    calls.clear()
    groups = generate_groups(Counting(), [p.token_ids for p in prompts], [7, 3], PARAMS, chunk=3)
    assert [len(g) for g in groups] == [7, 3] and max(calls) <= 3 and sum(calls) == 10
    multi = run_episodes(engine, tiny_tokenizer, prompts, [3, 1], PARAMS, env(turns=1))
    assert [len(g) for g in multi] == [3, 1]
    assert all(ep.messages[0]["content"] == prompts[i].row.prompt for i, g in enumerate(multi) for ep in g)


def test_episodes_on_vllm(vllm_here, tiny_model_path, tiny_tokenizer, model, prompts):
    spec = RunSpec.model_validate(
        {
            "model": {"path": str(tiny_model_path)},
            "data": {"path": "prompts.jsonl", "max_prompt_tokens": 64},
            "rubric": {"criteria": [{"name": "ok", "kind": "contains", "params": {"keywords": ["a"]}}]},
            "rollout": {"engine": "vllm", "vllm_enforce_eager": True, "vllm_gpu_memory_utilization": 0.1},
            "environment": env(turns=2).model_dump(),
        }
    )
    engine = create_engine(spec, model=model, tokenizer=tiny_tokenizer)
    try:
        episodes = flat(run_episodes(engine, tiny_tokenizer, prompts, 2, PARAMS, spec.environment))
    finally:
        engine.close()
    for ep in episodes:
        assert ep.end_reason == "done" and len(ep.turns) == 2
        assert ep.turns[0].observation_ids == observation_token_ids(
            tiny_tokenizer, ep.turns[0].observation, ep.turns[0].token_ids[-1]
        )
    assert sampled_token_gap(model, episodes, tiny_tokenizer.pad_token_id) < 1e-4
