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

With a `StaticDecoder` (the engine keeps one per device) the decode steps run on fixed
shapes instead: the KV cache is a set of buffers kept across calls, every step attends to the
buffer's whole capacity (columns not yet written are masked out), and the batch is padded to a
batch-size bucket. On CUDA each bucket's step is captured once as a CUDA graph and replayed
(as gpt-fast and vLLM do): a small model's decode step is bound by kernel launches, which a
replay issues as one. The graphs read the parameters where they are, and the optimiser updates
them in place, so a graph stays valid across training steps (one whose parameters moved is
captured again). Without graphs (the CPU) the same fixed-shape step runs eagerly, with no
bucket padding.

Sampling draws from torch's global generator (the inverse-CDF draw below), which the checkpoint
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
    static: StaticDecoder | None = None,
) -> list[Decoded]:
    """`counts[i]` samples of `prompts[i]`, in order (prompt 0's samples first), as one batch.
    `static`: decode on its fixed-shape cache (and its CUDA graphs); None: on a cache sized to
    this batch whose attention reads only the columns filled so far.
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
    if static is not None:
        static.load(cache, rows, P + params.max_new_tokens)
    else:
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
            if static is not None:
                static.select(keep)
            else:
                cache.batch_select_indices(keep)
            seen = seen[keep]
        col = P + t
        seen[:, col] = True
        if static is not None:
            logits = static.step(cache, new, next_pos, seen, col)
        else:
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


class GraphsUnavailable(RuntimeError):
    """CUDA-graph decoding cannot run here (no CUDA device, or a model whose step has no fixed shape)."""


def bucket_sizes(max_batch: int) -> list[int]:
    """Batch sizes a graph is captured for: powers of two below `max_batch`, and `max_batch`."""
    sizes, b = [], 1
    while b < max_batch:
        sizes.append(b)
        b *= 2
    return [*sizes, max_batch]


class _StaticLayer:
    """One full-attention layer's keys and values in the decoder's buffers (rows x heads x capacity x
    head dim). A step writes its column in place (`index_copy_` at a column held in a tensor, so a
    captured graph writes where the replay says) and attention reads the first `rows` rows over the
    whole capacity: the shapes never change, the mask hides columns not written yet."""

    is_sliding = False
    is_compileable = False

    def __init__(self, key_buf: torch.Tensor, value_buf: torch.Tensor, column: torch.Tensor, length: int) -> None:
        self.key_buf, self.value_buf, self.column = key_buf, value_buf, column
        self.rows = key_buf.shape[0]
        self.length = length
        self.is_initialized = True
        self.dtype, self.device = key_buf.dtype, key_buf.device

    @property
    def keys(self) -> torch.Tensor:
        return self.key_buf[: self.rows]

    @property
    def values(self) -> torch.Tensor:
        return self.value_buf[: self.rows]

    def update(self, key_states, value_states, cache_kwargs=None):
        self.key_buf[: self.rows].index_copy_(2, self.column, key_states)
        self.value_buf[: self.rows].index_copy_(2, self.column, value_states)
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.key_buf.shape[2], 0

    def get_max_length(self) -> int:
        return self.key_buf.shape[2]


class StaticDecoder:
    """Fixed-shape decode steps for one model on one device, kept by the engine across calls
    (and training steps): KV buffers of `capacity` columns for up to `max_batch` rows, the step's
    inputs in buffers of their own, and on CUDA with `graphs` one captured graph per batch-size
    bucket (`bucket_sizes`), replayed for every step whose batch fits it.

    A graph reads the parameters' storage as it was at capture: the optimiser's in-place updates
    reach it, a parameter replaced by another tensor would not, so each call checks the
    parameters' addresses and captures again when they moved. A capture that fails (a model whose
    forward synchronises with the host, say) is said in `stats["fallback"]` and with a warning, and
    the steps run eagerly on the same buffers. `stats` counts captures, replays and eager steps."""

    def __init__(
        self, model: Any, *, max_batch: int, graphs: bool, pad_to_buckets: bool | None = None, capacity_step: int = 64
    ) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        if graphs and self.device.type != "cuda":
            raise GraphsUnavailable(
                f"CUDA graphs need a CUDA device, and this model is on {self.device.type}: decode there without "
                "graphs (StaticDecoder(graphs=False), or leave rollout.cuda_graphs on: the engine uses graphs on "
                "CUDA only)"
            )
        if not takes_4d_mask(model):
            raise GraphsUnavailable(
                "fixed-shape decoding needs an attention that reads a ready 4D mask over the whole past (eager or "
                f"SDPA, no sliding window); this model's is {model.config._attn_implementation!r}"
            )
        self.graphs = graphs
        # Padding a batch to its bucket is what lets a graph be reused; without graphs it only costs rows
        # (the CPU tests turn it on to check that the padding rows change nothing).
        self.pad_to_buckets = graphs if pad_to_buckets is None else pad_to_buckets
        self.max_batch = max_batch
        self.capacity_step = capacity_step
        self.dtype = next(model.parameters()).dtype
        self.stats: dict[str, Any] = {"captures": 0, "replays": 0, "eager_steps": 0, "fallback": None}
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []
        self._graphs: dict[int, tuple[Any, torch.Tensor]] = {}  # bucket -> (CUDAGraph, its logits)
        self._pool: Any = None
        self._params: tuple[int, ...] = ()
        self._filled = 0  # columns of the buffers written by this batch
        self._layers: list[_StaticLayer] = []

    def _param_addresses(self) -> tuple[int, ...]:
        return tuple(p.data_ptr() for p in self.model.parameters())

    def load(self, cache: Any, rows: torch.Tensor, capacity: int) -> None:
        """Copy the prefilled cache's rows (`rows` indexes them, (B,)) into the buffers and put
        layers over the buffers in its place. Grows the buffers (and drops the graphs) when the
        batch or the completion does not fit them."""
        B = len(rows)
        self.max_batch = max(self.max_batch, B)
        batch = self._bucket(B)
        shapes = [(k.shape[1], k.shape[3], v.shape[1], v.shape[3], k.dtype) for k, v in
                  ((layer.keys, layer.values) for layer in cache.layers)]  # fmt: skip
        held = [(k.shape[1], k.shape[3], v.shape[1], v.shape[3], k.dtype) for k, v in
                zip(self._keys, self._values, strict=True)]  # fmt: skip
        if held != shapes or self._keys[0].shape[0] < batch or self._keys[0].shape[2] < capacity:
            rows_now, cap_now = (self._keys[0].shape[0], self._keys[0].shape[2]) if held == shapes else (0, 0)
            step = self.capacity_step
            self._allocate(cache, max(batch, rows_now), max(-(-capacity // step) * step, cap_now))
        if self.graphs and self._params != self._param_addresses():
            self._drop_graphs()
            self._params = self._param_addresses()
        P = cache.layers[0].keys.shape[2]
        for i, layer in enumerate(cache.layers):
            self._keys[i][:B, :, :P] = layer.keys[rows]
            self._values[i][:B, :, :P] = layer.values[rows]
        self._filled = P
        self._layers = [_StaticLayer(k, v, self._column, P) for k, v in zip(self._keys, self._values, strict=True)]
        cache.layers[:] = self._layers

    def _bucket(self, b: int) -> int:
        """Rows a step of b rows runs with: its bucket when padding to buckets, b itself otherwise."""
        return min(s for s in bucket_sizes(self.max_batch) if s >= b) if self.pad_to_buckets else b

    def _allocate(self, cache: Any, batch: int, capacity: int) -> None:
        self._drop_graphs()
        self._keys, self._values = [], []
        for layer in cache.layers:
            k, v = layer.keys, layer.values
            # zeros, not empty: masked columns are multiplied by a probability of 0, and 0 * NaN is NaN
            self._keys.append(k.new_zeros((batch, k.shape[1], capacity, k.shape[3])))
            self._values.append(v.new_zeros((batch, v.shape[1], capacity, v.shape[3])))
        self._ids = torch.zeros((batch, 1), dtype=torch.long, device=self.device)
        self._pos = torch.zeros((batch, 1), dtype=torch.long, device=self.device)
        self._mask = torch.full((batch, 1, 1, capacity), torch.finfo(self.dtype).min, dtype=self.dtype,
                                device=self.device)  # fmt: skip
        self._column = torch.zeros((1,), dtype=torch.long, device=self.device)

    def _drop_graphs(self) -> None:
        self._graphs.clear()
        self._pool = None

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the rows `keep` (indices into the batch now), moved to the buffers' first rows."""
        n, L = len(keep), self._filled
        for k, v in zip(self._keys, self._values, strict=True):
            k[:n, :, :L] = k[keep, :, :L]
            v[:n, :, :L] = v[keep, :, :L]

    def step(self, cache: Any, new: torch.Tensor, next_pos: torch.Tensor, seen: torch.Tensor, col: int) -> torch.Tensor:
        """The (b, V) logits after feeding `new` (b,) at positions `next_pos` (b,), written at column
        `col`, each row attending to its `seen` columns ((b, L) bool, L <= capacity)."""
        b = len(new)
        size = self._bucket(b)
        self._ids[:b, 0] = new
        self._pos[:b, 0] = next_pos
        if size > b:  # rows past the batch in its bucket: harmless inputs, their outputs unread
            self._ids[b:size] = 0
            self._pos[b:size] = 0
        mask = self._mask[:b, 0, 0]
        mask.fill_(torch.finfo(self.dtype).min)
        mask[:, : seen.shape[1]].masked_fill_(seen, 0.0)
        self._column.fill_(col)
        self._filled = col + 1
        for layer in self._layers:
            layer.rows, layer.length = size, col + 1
        if self.graphs and self.stats["fallback"] is None:
            graph = self._graphs.get(size) or self._capture(cache, size)
            if graph is not None:
                graph[0].replay()
                self.stats["replays"] += 1
                return graph[1][:b]
        self.stats["eager_steps"] += 1
        return self._forward(cache, size)[:b]

    def _forward(self, cache: Any, size: int) -> torch.Tensor:
        out = self.model(
            input_ids=self._ids[:size],
            attention_mask=self._mask[:size],
            position_ids=self._pos[:size],
            past_key_values=cache,
            use_cache=True,
        )
        return out.logits[:, -1]

    def _capture(self, cache: Any, size: int) -> tuple[Any, torch.Tensor] | None:
        """Capture the step for `size` rows (after warm-up runs on a side stream, as capture
        requires). The warm-up runs write this step's column with this step's inputs, as the
        replay then does again, so capturing mid-decode changes nothing. None: capture failed."""
        import warnings

        try:
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._forward(cache, size)
            torch.cuda.current_stream(self.device).wait_stream(stream)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            # thread_local: an asynchronous run trains on another thread while this one captures
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                logits = self._forward(cache, size)
        except Exception as exc:  # noqa: BLE001 - any failure means: no graphs, said, and decode goes on
            self.stats["fallback"] = f"CUDA graph capture failed ({type(exc).__name__}: {exc}); decoding eagerly"
            warnings.warn(self.stats["fallback"], RuntimeWarning, stacklevel=3)
            return None
        self._graphs[size] = (graph, logits)
        self.stats["captures"] += 1
        return self._graphs[size]
