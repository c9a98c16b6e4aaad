"""A lean sampling loop for transformers causal LMs: prefill, then one token at a time.

Why not `model.generate`: per step it rebuilds the attention mask from the 2D padding
mask, runs logits processors and stopping criteria over the whole batch and keeps every
finished row in the batch. A GRPO step samples G completions of each prompt, so here

- each distinct prompt is prefilled once and its KV cache repeated for its G samples
  (the samples of a group share the prompt);
- decoding passes a ready 4D additive mask (one row per sequence, extended by one column
  a step) where the model's attention takes one, so the model skips its mask building;
- temperature / top-k / top-p act on the last position's logits only;
- a row leaves the batch (its cache rows dropped) as soon as it emits an end-of-sequence
  token or completes a stop string; stop strings are checked only on rows whose new
  token could complete one;
- the logprob of each sampled token comes from the logits it was sampled from (after
  temperature, before top-k/top-p, as `trainers.update.logprobs` computes them), not from a
  second forward pass.

Sampling draws from torch's global generator (`torch.multinomial`), which the checkpoint
saves, so a resumed run samples the same completions. `supports_lean_decode` says whether
a model can take this path; the engine falls back to `generate` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainers.models.loading import accepts_logits_to_keep
from trainers.rollout.engines.base import FinishReason, SamplingParams

# Attention implementations that read an additive 4D mask as given (flash-attention wants 2D).
_MASK_4D_ATTENTION = ("eager", "sdpa")


@dataclass
class Decoded:
    """One sampled sequence: new tokens (EOS included when emitted), their logprobs, why it ended."""

    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: FinishReason
    stop: str | None = None  # the stop string that ended it, if one did


def takes_4d_mask(model: Any) -> bool:
    """Whether decoding may hand the model a ready additive mask: its attention reads one
    (eager / SDPA) and every layer attends to the full past (no sliding window or chunking,
    which a plain padding mask would ignore)."""
    config = model.config.get_text_config(decoder=True)
    if getattr(config, "_attn_implementation", None) not in _MASK_4D_ATTENTION:
        return False
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return all(t == "full_attention" for t in layer_types)
    return getattr(config, "sliding_window", None) is None and getattr(config, "attention_chunk_size", None) is None


class StopStrings:
    """Incremental stop-string matching. A stop string can only newly appear in a sequence
    when the token just added appends text holding the string's last character, or an
    incomplete UTF-8 sequence (byte-level tokens split characters); only rows whose new
    token is such a candidate are decoded and searched. A token's text is taken both alone
    and after another token, since SentencePiece tokenizers drop a leading space alone."""

    def __init__(self, stops: list[str], tokenizer: Any, device: torch.device) -> None:
        self.stops = [s for s in stops if s]
        self.tokenizer = tokenizer
        self.candidates = torch.zeros(0, dtype=torch.bool, device=device)
        if self.stops:
            last_chars = {s[-1] for s in self.stops}
            vocab = range(len(tokenizer))
            alone = tokenizer.batch_decode([[i] for i in vocab], skip_special_tokens=True)
            ref = (tokenizer.encode("a", add_special_tokens=False) or [0])[0]
            skip = len(tokenizer.decode([ref], skip_special_tokens=True))
            after = [t[skip:] for t in tokenizer.batch_decode([[ref, i] for i in vocab], skip_special_tokens=True)]
            flags = [
                any(c in a + b for c in last_chars) or "\ufffd" in a + b for a, b in zip(alone, after, strict=True)
            ]
            self.candidates = torch.tensor(flags, dtype=torch.bool, device=device)

    def __bool__(self) -> bool:
        return bool(self.stops)

    def might_complete(self, tokens: torch.Tensor) -> torch.Tensor:
        """(b,) bool: which new tokens could complete a stop string (out-of-vocab ids: yes)."""
        inside = tokens < len(self.candidates)
        return ~inside | self.candidates[tokens.clamp(max=len(self.candidates) - 1)]

    def first_in(self, token_ids: list[int]) -> str | None:
        """The stop string that occurs earliest in the decoded tokens, if any."""
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        hits = [(text.find(s), s) for s in self.stops if s in text]
        return min(hits)[1] if hits else None


def sample_next(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """Next token of each row from its last-position logits (b, V), and its logprob under
    the temperature-scaled distribution (unfiltered by top-k / top-p). Greedy when temperature 0."""
    logits = logits.float()
    if params.temperature == 0:
        tokens = logits.argmax(-1)  # (b,)
        return tokens, _logprob_of(logits, tokens)
    if params.temperature != 1.0:
        logits = logits / params.temperature
    filtered = logits
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = torch.topk(filtered, params.top_k, dim=-1).values[:, -1:]  # (b, 1)
        filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if params.top_p < 1.0:
        filtered = _top_p(filtered, params.top_p)
    # Inverse-CDF draw: one uniform number per row. On CPU torch.multinomial (and the
    # exponential race) cost ~15x more, mostly drawing a random number per vocabulary entry.
    # The cdf is left unnormalised (u is scaled by its total instead): one exp pass over the
    # vocabulary, which also gives the logprob's normaliser when nothing was filtered out.
    peak = filtered.amax(-1, keepdim=True)  # (b, 1)
    cdf = (filtered - peak).exp_().cumsum_(-1)  # (b, V)
    u = torch.rand((len(cdf), 1), device=cdf.device) * cdf[:, -1:]  # (b, 1)
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)  # (b,)
    if filtered is not logits:  # the logprob is under the unfiltered distribution
        return tokens, _logprob_of(logits, tokens)
    log_z = peak.squeeze(-1) + cdf[:, -1].log()  # (b,)
    return tokens, logits.gather(-1, tokens[:, None]).squeeze(-1) - log_z


def _logprob_of(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return logits.gather(-1, tokens[:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)  # (b,)


def _top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p (the most likely always kept)."""
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)  # (b, V)
    probs = torch.softmax(sorted_logits, dim=-1)
    drop = probs.cumsum(-1) - probs >= top_p  # the mass before this token is already enough
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


@torch.inference_mode()
def lean_decode(
    model: Any,
    prompts: list[list[int]],
    counts: list[int],
    params: SamplingParams,
    *,
    eos_ids: list[int],
    pad_id: int,
    stops: StopStrings | None = None,
    between_tokens: Callable[[], None] | None = None,
    on_finished: Callable[[int], None] | None = None,
    on_token: Callable[[int, int], None] | None = None,
) -> list[Decoded]:
    """`counts[i]` samples of `prompts[i]`, in order (prompt 0's samples first), as one batch.
    `between_tokens()` is called before each token is sampled; what it raises ends the batch there.
    `on_finished(k)`: k more rows have ended (at a stop, or all that are left at the length limit);
    `on_token(t, max_new_tokens)`: the batch samples its t-th token (1-based) now."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    K, P = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((K, P), pad_id, dtype=torch.long)
    attn = torch.zeros((K, P), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding: every prompt ends at column P
        ids[i, P - len(p) :] = torch.tensor(p, dtype=torch.long)
        attn[i, P - len(p) :] = 1
    ids, attn = ids.to(device), attn.to(device)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)  # (K, P)

    # Prefill each distinct prompt once; its cache rows are then repeated for its samples.
    cache = DynamicCache()
    out = model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": 1} if accepts_logits_to_keep(model) else {}),
    )
    rows = torch.repeat_interleave(torch.arange(K, device=device), torch.tensor(counts, device=device))  # (B,)
    _expand_into_preallocated(cache, rows, P + params.max_new_tokens)
    logits = out.logits[:, -1][rows]  # (B, V)
    next_pos = positions[:, -1][rows] + 1  # (B,) position of the next token of each row
    use_4d = takes_4d_mask(model)
    dtype = next(model.parameters()).dtype
    # Columns a row may attend to: its prompt, then every token it has been fed so far.
    seen = torch.zeros((len(rows), P + params.max_new_tokens), dtype=torch.bool, device=device)
    seen[:, :P] = attn[rows].bool()

    B = len(rows)
    eos = torch.tensor([e for e in eos_ids if e is not None], dtype=torch.long, device=device)
    tokens = torch.zeros((B, params.max_new_tokens), dtype=torch.long, device=device)
    logps = torch.zeros((B, params.max_new_tokens), device=device)
    lengths = [params.max_new_tokens] * B
    ended: list[FinishReason] = ["length"] * B
    stop_hit: list[str | None] = [None] * B
    alive = torch.arange(B, device=device)  # original row of each row still in the batch
    for t in range(params.max_new_tokens):
        if between_tokens is not None:
            between_tokens()
        if on_token is not None:
            on_token(t + 1, params.max_new_tokens)
        new, new_logp = sample_next(logits, params)  # (b,)
        tokens[alive, t] = new
        logps[alive, t] = new_logp
        done = torch.isin(new, eos)  # (b,)
        if stops:
            done |= _stop_strings_done(stops, tokens, alive, new, t, stop_hit)
        finished = alive[done].tolist()
        for r in finished:
            lengths[r], ended[r] = t + 1, "stop"
        if finished and on_finished is not None:
            on_finished(len(finished))
        if t == params.max_new_tokens - 1:
            break
        if finished:  # finished rows leave the batch, cache rows included
            keep = (~done).nonzero().squeeze(-1)
            if len(keep) == 0:
                break
            alive, new, next_pos = alive[keep], new[keep], next_pos[keep]
            cache.batch_select_indices(keep)
            seen = seen[keep]
        col = P + t
        seen[:, col] = True
        mask = _additive_mask(seen[:, : col + 1], dtype) if use_4d else seen[:, : col + 1].long()
        out = model(
            input_ids=new[:, None],
            attention_mask=mask,
            position_ids=next_pos[:, None],
            past_key_values=cache,
            use_cache=True,
        )
        logits = out.logits[:, -1]
        next_pos = next_pos + 1

    if on_finished is not None and (at_length := sum(reason == "length" for reason in ended)):
        on_finished(at_length)
    tokens, logps = tokens.cpu(), logps.cpu()
    return [
        Decoded(
            token_ids=tokens[r, : lengths[r]].tolist(),
            logprobs=logps[r, : lengths[r]].tolist() if params.logprobs else None,
            finish_reason=ended[r],
            stop=stop_hit[r],
        )
        for r in range(B)
    ]


class _PreallocatedLayer:
    """A full-attention cache layer whose keys/values live in buffers sized for the whole
    completion: each step writes one column in place instead of `torch.cat`-ing the cache
    (DynamicLayer copies every layer's whole cache every step). Returns views of the filled part."""

    is_sliding = False
    is_compileable = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        B, H, L, D = keys.shape
        self.key_buf = keys.new_empty((B, H, capacity, D))
        self.value_buf = values.new_empty((B, values.shape[1], capacity, values.shape[-1]))
        self.key_buf[:, :, :L] = keys
        self.value_buf[:, :, :L] = values
        self.length = L
        self.is_initialized = True
        self.dtype, self.device = keys.dtype, keys.device

    @property
    def keys(self) -> torch.Tensor:
        return self.key_buf[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor:
        return self.value_buf[:, :, : self.length]

    def update(self, key_states, value_states, cache_kwargs=None):
        n = key_states.shape[-2]
        self.key_buf[:, :, self.length : self.length + n] = key_states
        self.value_buf[:, :, self.length : self.length + n] = value_states
        self.length += n
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.key_buf = self.key_buf[indices]
        self.value_buf = self.value_buf[indices]


def _expand_into_preallocated(cache: Any, rows: torch.Tensor, capacity: int) -> None:
    """Repeat the prefilled cache's rows (`rows` indexes them, (B,)) into preallocated layers,
    one copy for both. Layers of another kind (sliding windows) are only repeated."""
    from transformers.cache_utils import DynamicLayer

    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer:
            cache.layers[i] = _PreallocatedLayer(layer.keys[rows], layer.values[rows], capacity)
        else:
            layer.batch_select_indices(rows)


def _stop_strings_done(
    stops: StopStrings, tokens: torch.Tensor, alive: torch.Tensor, new: torch.Tensor, t: int, hit: list[str | None]
) -> torch.Tensor:
    """(b,) bool: rows whose token at column t completed a stop string (recorded in `hit`)."""
    done = torch.zeros_like(new, dtype=torch.bool)
    for i in stops.might_complete(new).nonzero().squeeze(-1).tolist():
        row = int(alive[i])
        stop = stops.first_in(tokens[row, : t + 1].tolist())
        if stop is not None:
            hit[row] = stop
            done[i] = True
    return done


def _additive_mask(seen: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(b, L) bool -> (b, 1, 1, L) additive mask: 0 where attended, the dtype's minimum elsewhere."""
    mask = torch.zeros(seen.shape, dtype=dtype, device=seen.device)
    return mask.masked_fill_(~seen, torch.finfo(dtype).min)[:, None, None, :]
