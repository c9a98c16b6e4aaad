"""The asynchronous pipeline (trainers.run.pipeline) on its own: the staleness rule, admission, its metrics,
and partial rollouts going on with new weights, each token keeping its own version and behaviour logprob."""

import threading
import time

import pytest
import torch

from trainers.curriculum.budgets import Allocation
from trainers.data.prompts import Prompt
from trainers.data.rows import PromptRow
from trainers.episodes import Episode, Turn
from trainers.rollout.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rollout.generate import ScoredGroup
from trainers.run.pipeline import Pipeline, SamplerGate, async_metrics, too_stale
from trainers.spec import AsyncSpec


def test_a_group_is_too_stale_only_beyond_max_staleness_versions():
    # Trained from version 5 with max_staleness 2: versions 3, 4, 5 are fine, 2 is three versions old.
    assert [too_stale(v, 5, 2) for v in (5, 4, 3, 2)] == [False, False, False, True]
    assert not too_stale(None, 5, 0)  # nothing recorded: never dropped


def episode(*turn_versions: list[int]) -> Episode:
    return Episode([1], [], turns=[Turn([7] * len(v), "x", versions=v) for v in turn_versions])


def test_async_metrics_count_rollouts_by_their_oldest_token_and_tokens_by_their_own_lag():
    # Trained from version 4: a whole rollout of version 4 (3 tokens, lag 0), one of version 3 (2 tokens,
    # lag 1) and a partial one, 2 tokens of version 2 continued by 2 of version 4 (lags 2, 2, 0, 0).
    # Token lags: 0 0 0 1 1 2 2 0 0 -> mean 6 / 9, max 2. Rollouts by oldest lag: one each of 0, 1, 2.
    eps = [episode([4, 4, 4]), episode([3, 3]), episode([2, 2, 4, 4])]
    out = async_metrics(eps, trained_version=4, max_staleness=2)
    assert out["async/staleness_mean"] == pytest.approx(6 / 9)
    assert out["async/staleness_max"] == 2.0
    assert [out[f"async/staleness_{k}"] for k in range(3)] == [1.0, 1.0, 1.0]
    assert [out[f"async/tokens_lag_{k}"] for k in range(3)] == [5.0, 2.0, 2.0]
    assert out["async/partial_frac"] == pytest.approx(1 / 3)


class CountingEngine(RolloutEngine):
    """One token per sample, at once; counts the samples it was asked for."""

    def __init__(self) -> None:
        self.samples = 0

    def generate(self, prompt_token_ids, n, params):
        self.samples += len(prompt_token_ids) * n
        return [[Generation([5], "a", [-1.0], "stop") for _ in range(n)] for _ in prompt_token_ids]


def prompt(i: int, ids: list[int] | None = None) -> Prompt:
    return Prompt(PromptRow(f"p{i}", i, f"prompt {i}", {}), f"prompt {i}", ids or [1, 2])


def pipeline_for(settings: AsyncSpec, engine: RolloutEngine, *, per_step: int, group_size: int, tokenizer=None,
                 max_new_tokens: int = 4) -> Pipeline:  # fmt: skip
    drawn = iter(range(10_000))

    def draw(n: int):
        return [prompt(next(drawn)) for _ in range(n)], Allocation([group_size] * n)

    def score(prompts, episodes):
        return [ScoredGroup(p, eps, []) for p, eps in zip(prompts, episodes, strict=True)]

    params = SamplingParams(max_new_tokens=max_new_tokens, logprobs=True)
    return Pipeline(settings, groups_per_step=per_step, version=0, engine=engine, tokenizer=tokenizer,
                    params=params, draw=draw, score=score)  # fmt: skip


def test_the_generator_runs_at_most_max_staleness_steps_ahead():
    # 2 groups a step, max_staleness 1: before any update it may start (1 + 1) x 2 = 4 groups; after the
    # first step takes 2 and the weights move to version 1, 2 more (6 in all), each of version 1.
    engine = CountingEngine()
    pipe = pipeline_for(AsyncSpec(mode="async", max_staleness=1), engine, per_step=2, group_size=3)
    pipe.start()
    try:
        taken = pipe.take(2, 2, trained_version=0, keep=lambda g: True)
        time.sleep(0.2)  # the generator has had its chance to run further ahead
        assert engine.samples == 4 * 3
        with pipe.gate.update():
            pipe.weights_updated(1)
        second = pipe.take(2, 2, trained_version=1, keep=lambda g: True)
        deadline = time.monotonic() + 5
        while engine.samples < 6 * 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert engine.samples == 6 * 3
        third = pipe.take(2, 2, trained_version=2, keep=lambda g: True)
    finally:
        pipe.close()
    assert [g.episodes[0].oldest_version for g in taken.kept + second.kept + third.kept] == [0, 0, 0, 0, 1, 1]
    assert third.dropped_stale == 0


def test_take_drops_groups_holding_a_token_older_than_the_bound_and_counts_them():
    # Driven by hand (not started): 4 groups of version 0 queued, then the weights move to version 2. A step
    # trained from version 2 (max_staleness 1) drops all four, which frees room for 2 groups of version 2.
    pipe = pipeline_for(AsyncSpec(mode="async", max_staleness=1), CountingEngine(), per_step=2, group_size=1)
    pipe.produce_once()
    pipe.produce_once()
    pipe.weights_updated(2)
    result = {}
    taker = threading.Thread(target=lambda: result.update(taken=pipe.take(2, 2, 2, keep=lambda g: True)))
    taker.start()
    deadline = time.monotonic() + 5
    while pipe.counters.dropped_stale < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    pipe.produce_once()
    taker.join(timeout=5)
    pipe.close()
    taken = result["taken"]
    assert taken.dropped_stale == 4 and pipe.counters.dropped_stale == 4
    assert [g.episodes[0].oldest_version for g in taken.kept] == [2, 2]


def test_a_partial_completion_goes_on_with_new_weights_and_keeps_each_tokens_logprob(tiny_model_path):
    # One group of 2 completions of 6 tokens, sampled 2 tokens a request (EOS suppressed: every one runs to
    # 6). After the first segment the sampler gets other weights (version 1): tokens 0-1 were sampled by
    # version 0, tokens 2-5 by version 1, and each token's behaviour logprob is that of its own version's
    # weights (checked against each version's forward pass on the finished sequence).
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.rollout.engines.hf import HFEngine
    from trainers.update.batches import TokenBatch
    from trainers.update.logprobs import batched_logprobs
    from trainers.update.micro_batching import MicroBatching

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    v0 = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    v1 = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    with torch.no_grad():
        for p in v1.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sampler = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    sampler.load_state_dict(v0.state_dict())
    engine = HFEngine(model=sampler, tokenizer=tokenizer)
    engine.eos_ids = [-1]  # no EOS: every completion runs to max_new_tokens
    settings = AsyncSpec(mode="async", max_staleness=2, partial_rollouts=True, segment_tokens=2)
    pipe = pipeline_for(settings, engine, per_step=1, group_size=2, tokenizer=tokenizer, max_new_tokens=6)
    pipe.produce_once()  # segment 1, version 0
    with pipe.gate.update():
        sampler.load_state_dict(v1.state_dict())
        pipe.weights_updated(1)
    pipe.produce_once()
    pipe.produce_once()  # segments 2 and 3, version 1: the group is finished and scored
    (group,) = pipe.take(1, 1, trained_version=1, keep=lambda g: True).kept
    pipe.close()

    episodes = group.episodes
    assert [ep.token_versions for ep in episodes] == [[0, 0, 1, 1, 1, 1]] * 2
    assert [ep.version_spans() for ep in episodes] == [[[0, 2], [1, 4]]] * 2
    batch = TokenBatch.build([ep.prompt_ids for ep in episodes], [ep.completion_ids for ep in episodes], pad_id=0)
    per_version = [batched_logprobs(m, batch, micro_batching=MicroBatching(size=8))[0] for m in (v0, v1)]
    behaviour = torch.tensor([ep.engine_logprobs for ep in episodes])  # (2, 6)
    torch.testing.assert_close(behaviour[:, :2], per_version[0][:, :2], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(behaviour[:, 2:], per_version[1][:, 2:], atol=1e-4, rtol=1e-4)
    assert not torch.allclose(per_version[0][:, 2:], per_version[1][:, 2:], atol=1e-3)  # the versions do differ


def test_an_error_in_the_generator_is_raised_by_take():
    class Broken(RolloutEngine):
        def generate(self, prompt_token_ids, n, params):
            raise OSError("engine went away")

    pipe = pipeline_for(AsyncSpec(mode="async", max_staleness=1), Broken(), per_step=1, group_size=1)
    pipe.start()
    with pytest.raises(RuntimeError, match="engine went away"):
        pipe.take(1, 1, trained_version=0, keep=lambda g: True)
    pipe.close()


def test_an_update_waiting_goes_before_the_generators_next_request():
    gate = SamplerGate()
    order: list[str] = []

    def update() -> None:
        with gate.update():
            order.append("update")

    def request() -> None:
        with gate.request():
            order.append("request")

    with gate.request():  # the generator's request in progress
        updater = threading.Thread(target=update)
        updater.start()
        time.sleep(0.05)  # the update waits for the request to end
        requester = threading.Thread(target=request)
        requester.start()
        time.sleep(0.05)  # the generator's next request, asked while the update waits
    updater.join(timeout=5)
    requester.join(timeout=5)
    assert order == ["update", "request"]
