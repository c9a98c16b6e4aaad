"""The lean decode loop stops computing a sequence once it has finished (issue 13)."""

import torch
from transformers import AutoModelForCausalLM

from trainers.data.prompts import encode_chat
from trainers.rollout.engines.base import SamplingParams
from trainers.rollout.engines.decode import lean_decode


def rows_per_forward(model, run):
    """(run()'s result, the batch size of every forward pass the model made during it)."""
    sizes: list[int] = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: sizes.append(kw["input_ids"].shape[0]), with_kwargs=True)
    try:
        return run(), sizes
    finally:
        hook.remove()


def test_a_finished_sequence_leaves_the_decode_batch(tiny_model_path, tiny_tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()
    prompts = [
        encode_chat(tiny_tokenizer, [{"role": "user", "content": text}])[1]
        for text in ("Repeat the letter: k", "What is 2 + 2?", "hi", "say yes")
    ]
    # The untrained model samples almost uniformly: a fifth of the vocabulary as end tokens makes
    # the samples end at many different steps.
    eos_ids = list(range(0, len(tiny_tokenizer), 5))
    params = SamplingParams(max_new_tokens=12, temperature=1.0)
    torch.manual_seed(0)
    decoded, sizes = rows_per_forward(
        model,
        lambda: lean_decode(model, prompts, [3] * 4, params, eos_ids=eos_ids, pad_id=tiny_tokenizer.pad_token_id),
    )
    lengths = [len(d.token_ids) for d in decoded]
    assert len(set(lengths)) >= 4 and min(lengths) < 12, "samples end at different steps, some before the cap"
    assert all((d.finish_reason == "stop") == (d.token_ids[-1] in eos_ids) for d in decoded)
    # One prefill over the 4 distinct prompts, then one forward per token fed back, over the samples
    # still running: the token sampled at step t (1-based) is fed on only by a sample longer than t.
    expected = [4] + [sum(n > t for n in lengths) for t in range(1, max(lengths))]
    assert sizes == expected
    assert sum(sizes[1:]) == sum(n - 1 for n in lengths), "each sample costs one row per token it goes on for"
