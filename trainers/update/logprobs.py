"""Per-token logprobs and entropy of completion tokens under a causal LM.

Sequences are laid out as [left-padded prompt | right-padded completion], so every
completion starts at the same column P. The forward runs in two parts: the decoder gives
the final hidden states (B, T, H) at the positions that predict the completion tokens
(`completion_hidden`), then the LM head turns the real (unmasked) ones into logprobs in
chunks of positions (`head_logprobs`), so that the (B, T, V) logits, about 10 GB in float32
for 16 x 1,024 tokens at a 152 k vocabulary, never exist at once.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from trainers.models.loading import accepts_logits_to_keep, supports_lean_decode
from trainers.scale.sharding import is_sharded, run_pass
from trainers.update.batches import TokenBatch
from trainers.update.micro_batching import MicroBatching
from trainers.update.packing import PackedRows

# Config fields of models whose logits are not `lm_head(final hidden state)`, with the value at
# which they change nothing: Gemma 2/3 soft-cap the final logits (tanh), Cohere and Granite scale
# them, Falcon-H1 multiplies the head. Applying the head alone would give other logprobs.
_HEAD_TRANSFORMS: dict[str, float | None] = {
    "final_logit_softcapping": None,
    "logit_scale": 1.0,
    "logits_scaling": 1.0,
    "lm_head_multiplier": 1.0,
}


def head_split_unsupported(model) -> str | None:
    """Why the model's logits cannot be computed as its decoder's hidden states through its output
    embeddings (then `token_logprobs` falls back to the model's own full logits); None when they can."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if not isinstance(head, torch.nn.Module):
        return "the model has no output embeddings module"
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    for name, neutral in _HEAD_TRANSFORMS.items():
        value = getattr(config, name, neutral)
        if value != neutral:
            return f"its logits are transformed after the head ({name}={value})"
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    if decoder is None or decoder is model:
        return "the model exposes no decoder separate from its head"
    params = inspect.signature(decoder.forward).parameters
    if not all(name in params for name in ("input_ids", "attention_mask", "position_ids")):
        return "its decoder does not take input ids, an attention mask and position ids"
    return None


def chunk_tokens_for(model, chunk_mib: float) -> int:
    """Completion positions per head chunk (`head_logprobs`) such that one chunk's float32 logits
    take at most `chunk_mib` MiB, from the model's vocabulary (its output embeddings' rows, else
    `config.vocab_size`); 0 (whole logits) when `chunk_mib` is 0."""
    if chunk_mib <= 0:
        return 0
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    vocab = weight.shape[0] if isinstance(weight, torch.Tensor) else model.config.get_text_config().vocab_size
    return max(1, int(chunk_mib * 2**20 // (vocab * 4)))


def token_logprobs(
    model,
    batch: TokenBatch,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    chunk_tokens: int = 0,
    pack_tokens: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(token) of each completion token, and optionally the entropy of pi at that position.

    Logits are divided by the sampling temperature (as verl and TRL do) so the ratio compares
    the distribution that was sampled from. Returns (logp (B,T), entropy (B,T) or None), 0 at
    masked positions (the head is applied to completion tokens only). The entropy carries a
    gradient only with `entropy_grad` (an entropy bonus); otherwise it is a diagnostic.
    `chunk_tokens` > 0 applies the head to that many positions at a time (see `head_logprobs`);
    `pack_tokens` > 0 runs the decoder over the sequences packed into rows of that many tokens
    (see `trainers.update.packing`) instead of the padded batch: same values, no padding computed.
    A sharded model (trainers.scale.sharding) runs it as one pass through its root unit."""
    return run_pass(
        model,
        lambda: _token_logprobs(model, batch, temperature, with_entropy, entropy_grad, chunk_tokens, pack_tokens),
    )


def _token_logprobs(
    model, batch: TokenBatch, temperature: float, with_entropy: bool, entropy_grad: bool, chunk_tokens: int,
    pack_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    options = {"temperature": temperature, "with_entropy": with_entropy, "entropy_grad": entropy_grad}
    if head_split_unsupported(model) is not None:
        logits = _outputs(model, _logits_step(model), batch, pack_tokens)  # (B, T, V)
        return _logprobs_from_logits(logits, batch.completion_ids, **options)
    real = batch.completion_mask.bool()  # (B, T)
    hidden = completion_hidden(model, batch, pack_tokens=pack_tokens)[real]  # (N, H)
    logp, entropy = head_logprobs(model, hidden, batch.completion_ids[real], chunk_tokens=chunk_tokens, **options)
    return _scatter(logp, real), (_scatter(entropy, real) if entropy is not None else None)


def _scatter(values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """(N,) values at the N True places of `where` (B, T), 0 elsewhere; differentiable."""
    return torch.zeros(where.shape, dtype=values.dtype, device=values.device).masked_scatter(where, values)


def completion_hidden(model, batch: TokenBatch, *, pack_tokens: int = 0) -> torch.Tensor:
    """(B, T, H) final hidden states (after the decoder's final norm) at the positions that predict
    each completion token: position t's state goes through the LM head to predict completion token t.
    Only for models `head_split_unsupported` accepts; peft (LoRA) wrappers forward to their decoder.
    `pack_tokens` > 0: computed over the sequences packed into rows of that many tokens."""
    return _outputs(model, _hidden_step(model.get_decoder()), batch, pack_tokens)


def head_logprobs(
    model,
    hidden: torch.Tensor,
    target_ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    chunk_tokens: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logp (...), entropy (...) or None) of `target_ids` (...) given final hidden states (..., H),
    through the model's output embeddings (its bias too, when it has one).

    The head runs over `chunk_tokens` flattened positions at a time (0: all at once), each chunk's
    logits cast to float32 before the logsumexp, gather and entropy. With gradients, each chunk is
    recomputed in the backward pass (activation checkpointing) instead of kept, so in the forward
    and in the backward at most one chunk's logits exist."""
    head = model.get_output_embeddings()
    shape = target_ids.shape
    flat_hidden = hidden.reshape(-1, hidden.shape[-1])  # (N, H)
    flat_ids = target_ids.reshape(-1)  # (N,)
    n = flat_ids.numel()
    size = chunk_tokens if 0 < chunk_tokens < n else max(n, 1)
    options = {"temperature": temperature, "with_entropy": with_entropy, "entropy_grad": entropy_grad}
    recompute = size < n and torch.is_grad_enabled()

    def chunk(h: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return _logprobs_from_logits(head(h), ids, **options)

    logps, entropies = [], []
    for start in range(0, max(n, 1), size):
        args = (flat_hidden[start : start + size], flat_ids[start : start + size])
        if recompute:
            logp, entropy = torch.utils.checkpoint.checkpoint(chunk, *args, use_reentrant=False)
        else:
            logp, entropy = chunk(*args)
        logps.append(logp)
        entropies.append(entropy)
    logp = torch.cat(logps).reshape(shape)
    return logp, (torch.cat(entropies).reshape(shape) if with_entropy else None)


def _logprobs_from_logits(
    logits: torch.Tensor, ids: torch.Tensor, *, temperature: float, with_entropy: bool, entropy_grad: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logp, entropy or None) of `ids` (...) under `logits` (..., V), in float32 whatever the logits' dtype."""
    logits = logits.float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_z = torch.logsumexp(logits, dim=-1)  # (...)
    logp = logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - log_z  # (...)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            probs = F.softmax(logits, dim=-1)
            entropy = log_z - (probs * logits).sum(-1)  # (...)
    return logp, entropy


def _hidden_step(decoder):
    """A forward step returning the decoder's final hidden states at the last `keep` positions."""

    def step(keep: int, **inputs) -> torch.Tensor:
        return decoder(**inputs).last_hidden_state[:, -keep:]

    return step


def _logits_step(model):
    """A forward step returning the model's logits at the last `keep` positions (the fallback:
    models whose head `head_split_unsupported` refuses)."""
    keep_arg = accepts_logits_to_keep(model)

    def step(keep: int, **inputs) -> torch.Tensor:
        return model(**inputs, **({"logits_to_keep": keep} if keep_arg else {})).logits[:, -keep:]

    return step


def _outputs(model, step, batch: TokenBatch, pack_tokens: int) -> torch.Tensor:
    """(B, T, X) outputs of `step` predicting each completion token, from the padded or the packed layout."""
    return _packed_outputs(step, batch, pack_tokens) if pack_tokens > 0 else _completion_outputs(model, step, batch)


def _packed_outputs(step, batch: TokenBatch, pack_tokens: int) -> torch.Tensor:
    """(B, T, X) outputs of `step` over the sequences packed into rows of at most `pack_tokens`
    tokens. No attention mask and no cache: that is how transformers' masking_utils knows to read
    the restarting position ids as sequence boundaries (a block-diagonal causal mask). Prompts are
    not shared across a group here: each sequence carries its own copy inside its block."""
    packed = PackedRows.build(batch, row_tokens=pack_tokens)
    out = step(
        packed.input_ids.shape[1],
        input_ids=packed.input_ids,
        attention_mask=None,
        position_ids=packed.position_ids,
        use_cache=False,
    )  # (R, L, X)
    return packed.gather(out)


def _completion_outputs(model, step, batch: TokenBatch) -> torch.Tensor:
    """(B, T, X) outputs of `step` (hidden states or logits) at the positions that predict each
    completion token. Rows whose prompts are equal (the samples of a group) share one pass over
    the prompt: it is run once per distinct prompt and its KV cache indexed out to the rows, so
    its gradient sums over the group; this skips (G-1)/G of the prompt tokens (15-18 % of a
    micro-batch's forward + backward for 16-token prompts and 64-token completions)."""
    T, P = batch.completion_mask.shape[1], batch.prompt_len
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+T)
    if P > 0 and _can_share_prompts(model):
        prompt_rows = torch.cat([batch.input_ids[:, :P], batch.attention_mask[:, :P]], dim=1)  # (B, 2P)
        unique, inverse = torch.unique(prompt_rows, dim=0, return_inverse=True)  # (K, 2P), (B,)
        if len(unique) < len(prompt_rows):
            return _shared_prompt_outputs(step, batch, unique, inverse, position_ids)
    out = step(
        T + 1,
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=position_ids,
        use_cache=False,
    )
    return out[:, :-1]


def _can_share_prompts(model) -> bool:
    """The prompt pass needs a KV cache, which gradient checkpointing turns off in training. Not for
    a sharded model: sharing takes two decoder passes where a batch has repeated prompts and one
    where it has none, and every process must run as many (collective) layer passes as the others."""
    if is_sharded(model):
        return False
    return supports_lean_decode(model) and not getattr(model, "is_gradient_checkpointing", False)


def _shared_prompt_outputs(step, batch: TokenBatch, unique, inverse, position_ids) -> torch.Tensor:
    from transformers import DynamicCache

    T, P = batch.completion_mask.shape[1], batch.prompt_len
    cache = DynamicCache()
    prompt_ids, prompt_attn = unique[:, :P], unique[:, P:]  # (K, P) each
    last = step(
        1,
        input_ids=prompt_ids,
        attention_mask=prompt_attn,
        position_ids=(prompt_attn.cumsum(-1) - 1).clamp(min=0),
        past_key_values=cache,
        use_cache=True,
    )
    first = last[inverse]  # (B, 1, X): the prompt's last position predicts completion token 0
    cache.batch_select_indices(inverse)  # (K, ...) -> (B, ...), differentiable indexing
    rest = step(
        T,
        input_ids=batch.input_ids[:, P:],
        attention_mask=batch.attention_mask,
        position_ids=position_ids[:, P:],
        past_key_values=cache,
        use_cache=True,
    )
    return torch.cat([first, rest[:, :-1]], dim=1)  # (B, T, X)


@torch.no_grad()  # not inference_mode: the results enter the loss, where autograd may save them
def batched_logprobs(
    model,
    batch: TokenBatch,
    *,
    micro_batching: MicroBatching,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk_tokens: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` over the batch in micro-batches, without gradients; (B, T) each."""
    B, T = batch.completion_mask.shape
    logp = torch.zeros(B, T, device=batch.input_ids.device)
    entropy = torch.zeros(B, T, device=batch.input_ids.device) if with_entropy else None
    options = {"temperature": temperature, "with_entropy": with_entropy, "chunk_tokens": chunk_tokens}
    for rows in micro_batching.split(batch):
        mb = batch.select(rows)
        t = mb.completion_mask.shape[1]
        lp, ent = token_logprobs(model, mb, pack_tokens=micro_batching.pack_tokens, **options)
        logp[rows, :t] = lp
        if entropy is not None:
            entropy[rows, :t] = ent
    return logp * batch.completion_mask, (entropy * batch.completion_mask if entropy is not None else None)
