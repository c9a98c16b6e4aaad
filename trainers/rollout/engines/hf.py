"""Rollouts from the policy itself with transformers (CPU or one GPU).

Decoder-only models with a standard KV cache sample through `trainers.rollout.engines.decode`
(each prompt prefilled once for its group, finished rows leave the batch, logprobs from
the sampling logits); other models (encoder-decoders, stateful or custom-cache models)
through `model.generate`, chosen by `supports_lean_decode`.

Sampling draws from torch's global generator, which the checkpoint saves, so a resumed
run samples the same completions. On the `generate` path, logprobs of the sampled tokens
come from one batched forward pass over the finished sequences (`trainers.update.logprobs`)
instead of generate's per-step scores, whose (steps, B, vocab) tensors do not fit for
long completions with large vocabularies.
"""

from __future__ import annotations

from typing import Any

import torch

from trainers.models.loading import supports_lean_decode
from trainers.rollout.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rollout.engines.decode import Decoded, StaticDecoder, StopStrings, lean_decode, takes_4d_mask
from trainers.spec import RunSpec
from trainers.update.batches import TokenBatch
from trainers.update.logprobs import batched_logprobs, chunk_tokens_for
from trainers.update.micro_batching import MicroBatching


class HFEngine(RolloutEngine):
    samples_from_model = True  # sharded runs give it a whole copy of the policy (see RolloutEngine)

    def __init__(
        self, spec: RunSpec | None = None, *, model: Any, tokenizer: Any, batch_size: int | None = None
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size or (spec.rollout.generation_batch_size if spec else 64)
        # positions per LM-head chunk of the logprob pass (trainers.update.logprobs.head_logprobs)
        self.chunk_tokens = chunk_tokens_for(model, spec.optim.logprob_chunk_mib) if spec else 0
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids: list[int] = list(eos) if isinstance(eos, list | tuple) else [eos]
        self.lean = supports_lean_decode(model)  # False: every batch goes through model.generate
        self._stops: StopStrings | None = None  # built for the last stop-string list seen
        self.cuda_graphs = spec.rollout.cuda_graphs if spec else True
        self._static: StaticDecoder | None = None  # kept across calls: its graphs outlive a training step

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generate(self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams) -> list[list[Generation]]:
        out: list[Generation] = []
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling; lets the KV cache work with gradient checkpointing
        try:
            if self.lean:
                for batch in self._group_batches(len(prompt_token_ids), n):
                    out.extend(
                        self._decode_batch([prompt_token_ids[i] for i, _ in batch], [c for _, c in batch], params)
                    )
            else:
                flat = [ids for ids in prompt_token_ids for _ in range(n)]  # prompt i's samples are contiguous
                for start in range(0, len(flat), self.batch_size):
                    if self.between_tokens is not None:  # generate() runs a batch whole: asked between batches
                        self.between_tokens()
                    out.extend(self._generate_batch(flat[start : start + self.batch_size], params))
                    if self.completed is not None:
                        self.completed(len(flat[start : start + self.batch_size]))
        finally:
            self.model.train(was_training)
        return [out[i * n : (i + 1) * n] for i in range(len(prompt_token_ids))]

    def _group_batches(self, num_prompts: int, n: int) -> list[list[tuple[int, int]]]:
        """Batches of at most `batch_size` rows as (prompt index, samples) pieces, in prompt
        order; a group is split only when it alone exceeds the batch size."""
        batches: list[list[tuple[int, int]]] = [[]]
        rows = 0
        for i in range(num_prompts):
            left = n
            while left:
                take = min(left, self.batch_size)
                if rows + take > self.batch_size:
                    batches.append([])
                    rows = 0
                batches[-1].append((i, take))
                rows += take
                left -= take
        return [b for b in batches if b]

    def _decode_batch(self, prompts: list[list[int]], counts: list[int], params: SamplingParams) -> list[Generation]:
        if params.stop and (self._stops is None or self._stops.stops != [s for s in params.stop if s]):
            self._stops = StopStrings(params.stop, self.tokenizer, self.device)
        decoded = lean_decode(
            self.model,
            prompts,
            counts,
            params,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
            stops=self._stops if params.stop else None,
            between_tokens=self.between_tokens,
            on_finished=self.completed,
            on_token=self.decoding,
            static=self.static_decoder(),
        )
        return [self._generation(d, params) for d in decoded]

    def static_decoder(self) -> StaticDecoder | None:
        """The fixed-shape decoder with CUDA graphs where they can run: a CUDA device, graphs on
        (rollout.cuda_graphs), an attention that takes a ready 4D mask. Elsewhere None: the decode
        attends only to the columns filled so far, which on the CPU gives today's numbers to the
        last bit (the fixed-shape step attends to masked columns too, which moves logprobs by ~1e-6)."""
        if not (self.cuda_graphs and self.device.type == "cuda" and takes_4d_mask(self.model)):
            return None
        if self._static is None or self._static.model is not self.model or self._static.device != self.device:
            self._static = StaticDecoder(self.model, max_batch=self.batch_size, graphs=True)
        return self._static

    def close(self) -> None:
        self._static = None  # its buffers and graphs hold device memory

    def _generation(self, d: Decoded, params: SamplingParams) -> Generation:
        tokens, logprobs = d.token_ids, d.logprobs
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if d.stop is not None:
            if d.stop in self.tokenizer.decode(tokens[:-1], skip_special_tokens=True):
                # Found a token late (a tokenizer whose token texts depend on context): cut back.
                tokens = self._tokens_through(tokens, d.stop)
                logprobs = logprobs[: len(tokens)] if logprobs is not None else None
            text = text[: text.find(d.stop) + (len(d.stop) if params.include_stop_in_text else 0)]
        return Generation(token_ids=tokens, text=text, logprobs=logprobs, finish_reason=d.finish_reason)

    @torch.inference_mode()
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:

        P = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), P), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(prompts):  # left padding: every prompt ends at column P
            ids[i, P - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[i, P - len(p) :] = 1
        config = neutral_generation_config(
            params, eos_token_id=self.eos_ids, pad_token_id=self.pad_id, stop_strings=params.stop or None
        )
        sequences = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=attn.to(self.device),
            generation_config=config,
            tokenizer=self.tokenizer if params.stop else None,
        )
        gens = [self._finish(row[P:].tolist(), params) for row in sequences.cpu()]
        if params.logprobs:
            self._attach_logprobs(prompts, gens, params.temperature)
        return gens

    def _finish(self, new_tokens: list[int], params: SamplingParams) -> Generation:
        """Cut the padding after EOS and the text at a stop string; tell stop from length."""
        tokens = new_tokens
        finish = "length"
        for i, tok in enumerate(new_tokens):
            if tok in self.eos_ids:
                tokens, finish = new_tokens[: i + 1], "stop"
                break
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        hits = [(text.find(s), s) for s in params.stop if s and s in text]
        if hits:
            cut, stop = min(hits)  # the earliest stop string wins
            tokens = self._tokens_through(tokens, stop)
            text, finish = text[: cut + (len(stop) if params.include_stop_in_text else 0)], "stop"
        if finish == "length" and len(tokens) < params.max_new_tokens:
            finish = "stop"  # generate stopped early on a stop string it matched on tokens
        return Generation(token_ids=tokens, text=text, logprobs=None, finish_reason=finish)

    def _tokens_through(self, tokens: list[int], stop: str) -> list[int]:
        """Shortest prefix of `tokens` whose text contains `stop` (the stop string's tokens stay,
        as vLLM keeps them, so the policy learns to emit them)."""
        for end in range(1, len(tokens) + 1):
            if stop in self.tokenizer.decode(tokens[:end], skip_special_tokens=True):
                return tokens[:end]
        return tokens

    def _attach_logprobs(self, prompts: list[list[int]], gens: list[Generation], temperature: float) -> None:
        batch = TokenBatch.build(prompts, [g.token_ids for g in gens], pad_id=self.pad_id, device=self.device)
        logp, _ = batched_logprobs(
            self.model,
            batch,
            micro_batching=MicroBatching(size=self.batch_size),
            temperature=temperature,
            chunk_tokens=self.chunk_tokens,
        )
        for g, row in zip(gens, logp.cpu(), strict=True):
            g.logprobs = row[: len(g.token_ids)].tolist()


# Fields that reshape the sampling distribution, at their "off" value. Set explicitly because
# `generate` fills every field left None from the model's own generation_config (a checkpoint's
# top_k, min_p or repetition penalty would otherwise leak into the sampled distribution).
_NEUTRAL_GENERATION = {
    "min_p": 0.0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_length": 0,
    "min_new_tokens": 0,
    "num_beams": 1,
    "num_return_sequences": 1,
}


def neutral_generation_config(params: SamplingParams, **settings: Any):
    """A transformers GenerationConfig that samples exactly as `params` says and nothing else."""
    from transformers import GenerationConfig

    greedy = params.temperature == 0
    return GenerationConfig(
        **_NEUTRAL_GENERATION,
        max_new_tokens=params.max_new_tokens,
        do_sample=not greedy,
        temperature=1.0 if greedy else params.temperature,
        top_p=1.0 if greedy else params.top_p,
        top_k=0 if greedy else params.top_k,
        use_cache=True,
        **settings,
    )
