"""The fixed-shape decode (static KV cache, batch-size buckets, CUDA graphs on CUDA) samples the tokens
the decode attending only to filled columns samples (`static=None`, which the fixed-seed recorded numbers
pin down), for the same seed. On the CPU the fixed-shape step runs eagerly; the graph tests need CUDA."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers.helpers import tiny_spec
from trainers.data.prompts import encode_chat
from trainers.rollout.engines.base import SamplingParams
from trainers.rollout.engines.decode import GraphsUnavailable, StaticDecoder, bucket_sizes, lean_decode
from trainers.rollout.engines.hf import HFEngine

NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU; none here")
TEXTS = ("Repeat the letter: k", "What is 2 + 2? Answer with one number only, please.", "hi", "say yes now")


@pytest.fixture(scope="module")
def model(tiny_model_path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    out = [encode_chat(tiny_tokenizer, [{"role": "user", "content": t}])[1] for t in TEXTS]
    assert len({len(p) for p in out}) == len(out), "unequal lengths: the batch is left-padded"
    return out


def decode(model, prompts, counts, params, eos_ids, pad_id, seed, static=None):
    torch.manual_seed(seed)
    return lean_decode(model, prompts, counts, params, eos_ids=eos_ids, pad_id=pad_id, static=static)


def assert_same(reference, got):
    assert [d.token_ids for d in got] == [d.token_ids for d in reference]
    assert [d.finish_reason for d in got] == [d.finish_reason for d in reference]
    for r, g in zip(reference, got, strict=True):
        # The fixed-shape step attends to masked columns too: the same distribution to float rounding.
        torch.testing.assert_close(torch.tensor(g.logprobs), torch.tensor(r.logprobs), atol=1e-5, rtol=0)


# (prompt indices, samples of each): batches of 1, 5 and 16 rows
BATCHES = [([2], [1]), ([0, 1], [2, 3]), ([0, 1, 2, 3], [4, 4, 4, 4])]
# The untrained model's next token is near uniform, greedy or not: a fifth of the vocabulary as end
# tokens ends rows at many different steps.
EOS_EVERY = 5


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_new_tokens=10, temperature=0.0, logprobs=True),
        SamplingParams(max_new_tokens=10, temperature=1.0, logprobs=True),
        SamplingParams(max_new_tokens=10, temperature=0.8, top_k=50, top_p=0.9, logprobs=True),
    ],
    ids=["greedy", "sampled", "top_k_top_p"],
)
def test_the_fixed_shape_decode_samples_the_same_tokens(model, prompts, tiny_tokenizer, params):
    pad, eos_ids = tiny_tokenizer.pad_token_id, list(range(0, len(tiny_tokenizer), EOS_EVERY))
    # One decoder of each kind for every batch: its buffers outlive a call and grow when a batch needs
    # more rows. "buckets" pads each step to its batch-size bucket, the shapes a CUDA graph replays.
    rows = StaticDecoder(model, max_batch=4, graphs=False)
    buckets = StaticDecoder(model, max_batch=4, graphs=False, pad_to_buckets=True)
    ended_early = 0
    for seed, (which, counts) in enumerate(BATCHES):
        batch = [prompts[i] for i in which]
        reference = decode(model, batch, counts, params, eos_ids, pad, seed)
        assert_same(reference, decode(model, batch, counts, params, eos_ids, pad, seed, static=rows))
        assert_same(reference, decode(model, batch, counts, params, eos_ids, pad, seed, static=buckets))
        ended_early += sum(len(d.token_ids) < params.max_new_tokens for d in reference)
    assert ended_early >= 3, "rows left the batch part-way (EOS mid-batch)"
    assert rows.stats["eager_steps"] > 0 and rows.stats["replays"] == 0
    assert buckets._keys[0].shape[0] == 16, "the buffers grew to the largest batch's bucket"


def test_buckets_are_powers_of_two_up_to_the_batch():
    assert bucket_sizes(12) == [1, 2, 4, 8, 12]
    assert bucket_sizes(1) == [1]
    assert bucket_sizes(16) == [1, 2, 4, 8, 16]


def test_graphs_are_refused_in_words_without_cuda(model):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(GraphsUnavailable, match="CUDA graphs need a CUDA device, and this model is on cpu"):
        StaticDecoder(model, max_batch=4, graphs=True)


def test_the_engine_decodes_without_graphs_on_the_cpu(tiny_model_path, tiny_tokenizer, model, prompts, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    spec = tiny_spec(tiny_model_path, tmp_path)
    assert spec.rollout.cuda_graphs, "on by default (for CUDA)"
    engine = HFEngine(spec, model=model, tokenizer=tiny_tokenizer)
    assert engine.static_decoder() is None, "the CPU keeps the decode whose numbers are recorded"
    out = engine.generate(prompts[:2], 2, SamplingParams(max_new_tokens=4))
    assert [len(g) for g in out] == [2, 2]


@NEEDS_CUDA
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_graph_replay_samples_what_the_eager_decode_samples(tiny_model_path, prompts, tiny_tokenizer, temperature):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).cuda().eval()
    params = SamplingParams(max_new_tokens=14, temperature=temperature, logprobs=True)
    eos_ids = list(range(0, len(tiny_tokenizer), 5))
    pad = tiny_tokenizer.pad_token_id
    static = StaticDecoder(model, max_batch=16, graphs=True)
    for seed, (which, counts) in enumerate(BATCHES):
        batch = [prompts[i] for i in which]
        eager = StaticDecoder(model, max_batch=16, graphs=False, pad_to_buckets=True)
        assert_same(decode(model, batch, counts, params, eos_ids, pad, seed, static=eager),
                    decode(model, batch, counts, params, eos_ids, pad, seed, static=static))  # fmt: skip
    assert static.stats["fallback"] is None
    assert static.stats["replays"] > 0 and static.stats["eager_steps"] == 0
    assert static.stats["captures"] <= len(bucket_sizes(16)), "one capture per bucket, reused across calls"


@NEEDS_CUDA
def test_a_graph_stays_valid_across_an_in_place_update(tiny_model_path, prompts, tiny_tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).cuda().eval()
    params = SamplingParams(max_new_tokens=10, temperature=0.0, logprobs=True)
    pad = tiny_tokenizer.pad_token_id
    static = StaticDecoder(model, max_batch=8, graphs=True)
    decode(model, prompts, [2, 2, 2, 2], params, [], pad, 0, static=static)
    captures = static.stats["captures"]
    with torch.no_grad():  # what an optimiser step does: the same storage, new values
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    after = decode(model, prompts, [2, 2, 2, 2], params, [], pad, 0, static=static)
    eager = decode(model, prompts, [2, 2, 2, 2], params, [], pad, 0,
                   static=StaticDecoder(model, max_batch=8, graphs=False, pad_to_buckets=True))  # fmt: skip
    assert_same(eager, after)
    assert static.stats["captures"] == captures, "no capture again: the graphs read the updated weights"
