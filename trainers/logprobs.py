"""Per-token logprobs and entropy of completion tokens under a causal LM.

Sequences are laid out as [left-padded prompt | right-padded completion], so every
completion starts at the same column P. The model is asked for logits of the last T+1
positions only (`logits_to_keep`), which skips the LM head over the prompt.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TokenBatch:
    """Prompts + completions as tensors. Shapes: B sequences, P prompt columns, T completion columns."""

    input_ids: torch.Tensor  # (B, P+T)
    attention_mask: torch.Tensor  # (B, P+T) 1 on real tokens
    completion_mask: torch.Tensor  # (B, T) float, 1 on completion tokens

    @property
    def prompt_len(self) -> int:
        return self.input_ids.shape[1] - self.completion_mask.shape[1]

    @property
    def completion_ids(self) -> torch.Tensor:  # (B, T)
        return self.input_ids[:, self.prompt_len :]

    @classmethod
    def build(
        cls, prompts: list[list[int]], completions: list[list[int]], *, pad_id: int, device: torch.device | str = "cpu"
    ) -> TokenBatch:
        B = len(prompts)
        P = max(len(p) for p in prompts)
        T = max(1, max(len(c) for c in completions))
        ids = torch.full((B, P + T), pad_id, dtype=torch.long)
        attn = torch.zeros((B, P + T), dtype=torch.long)
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            ids[i, P - len(p) : P] = torch.tensor(p, dtype=torch.long)
            ids[i, P : P + len(c)] = torch.tensor(c, dtype=torch.long)
            attn[i, P - len(p) : P + len(c)] = 1
        mask = attn[:, P:].float()
        return cls(ids.to(device), attn.to(device), mask.to(device))

    def select(self, index: slice | torch.Tensor) -> TokenBatch:
        """Rows `index`, with columns that are padding in every selected row trimmed away."""
        ids, attn, mask = self.input_ids[index], self.attention_mask[index], self.completion_mask[index]
        P = self.prompt_len
        first = int(attn[:, :P].any(0).nonzero()[0]) if attn[:, :P].any() else P
        real = mask.any(0).nonzero()
        T = int(real[-1]) + 1 if len(real) else 1
        return TokenBatch(ids[:, first : P + T], attn[:, first : P + T], mask[:, :T])


def micro_batches(batch: TokenBatch, size: int) -> list[torch.Tensor]:
    """Row indices of micro-batches of at most `size` sequences, grouped by completion length
    so that `select` trims most of the padding (completions that stop early at EOS do not pay
    for the longest one). Every row appears once."""
    lengths = batch.completion_mask.sum(-1)  # (B,)
    order = torch.argsort(lengths, stable=True)
    return list(torch.split(order, size))


def accepts_logits_to_keep(model) -> bool:
    forward = getattr(model, "get_base_model", lambda: model)().forward
    return "logits_to_keep" in inspect.signature(forward).parameters


def token_logprobs(
    model, batch: TokenBatch, *, temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(token) of each completion token, and optionally the entropy of pi at that position.

    Logits are divided by the sampling temperature (as verl and TRL do) so the ratio compares
    the distribution that was sampled from. Returns (logp (B,T), entropy (B,T) or None);
    values at masked positions are meaningless and must be masked by the caller. The entropy
    carries a gradient only with `entropy_grad` (an entropy bonus); otherwise it is a diagnostic."""
    logits = _completion_logits(model, batch).float()  # (B, T, V): position t predicts completion token t
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_z = torch.logsumexp(logits, dim=-1)  # (B, T)
    logp = logits.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1) - log_z  # (B, T)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            probs = F.softmax(logits, dim=-1)
            entropy = log_z - (probs * logits).sum(-1)  # (B, T)
    return logp, entropy


def _completion_logits(model, batch: TokenBatch) -> torch.Tensor:
    """(B, T, V) logits that predict each completion token. Rows whose prompts are equal (the
    samples of a group) share one pass over the prompt: it is run once per distinct prompt
    and its KV cache indexed out to the rows, so its gradient sums over the group; this skips
    (G-1)/G of the prompt tokens (15-18 % of a micro-batch's forward + backward for 16-token
    prompts and 64-token completions)."""
    T, P = batch.completion_mask.shape[1], batch.prompt_len
    position_ids = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)  # (B, P+T)
    keep = accepts_logits_to_keep(model)
    if P > 0 and _can_share_prompts(model):
        prompt_rows = torch.cat([batch.input_ids[:, :P], batch.attention_mask[:, :P]], dim=1)  # (B, 2P)
        unique, inverse = torch.unique(prompt_rows, dim=0, return_inverse=True)  # (K, 2P), (B,)
        if len(unique) < len(prompt_rows):
            return _shared_prompt_logits(model, batch, unique, inverse, position_ids, keep)
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=position_ids,
        use_cache=False,
        **({"logits_to_keep": T + 1} if keep else {}),
    )
    return out.logits[:, -(T + 1) : -1]


def _can_share_prompts(model) -> bool:
    """The prompt pass needs a KV cache, which gradient checkpointing turns off in training."""
    from trainers.engines.decode import supports_lean_decode  # the engines import this module

    return supports_lean_decode(model) and not getattr(model, "is_gradient_checkpointing", False)


def _shared_prompt_logits(model, batch: TokenBatch, unique, inverse, position_ids, keep: bool) -> torch.Tensor:
    from transformers import DynamicCache

    T, P = batch.completion_mask.shape[1], batch.prompt_len
    cache = DynamicCache()
    prompt_ids, prompt_attn = unique[:, :P], unique[:, P:]  # (K, P) each
    out = model(
        input_ids=prompt_ids,
        attention_mask=prompt_attn,
        position_ids=(prompt_attn.cumsum(-1) - 1).clamp(min=0),
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": 1} if keep else {}),
    )
    first = out.logits[:, -1:][inverse]  # (B, 1, V): the prompt's last position predicts completion token 0
    cache.batch_select_indices(inverse)  # (K, ...) -> (B, ...), differentiable indexing
    out = model(
        input_ids=batch.input_ids[:, P:],
        attention_mask=batch.attention_mask,
        position_ids=position_ids[:, P:],
        past_key_values=cache,
        use_cache=True,
        **({"logits_to_keep": T} if keep else {}),
    )
    return torch.cat([first, out.logits[:, -T:-1]], dim=1)  # (B, T, V)


@torch.no_grad()  # not inference_mode: the results enter the loss, where autograd may save them
def batched_logprobs(
    model, batch: TokenBatch, *, micro_batch_size: int, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` over the batch in micro-batches, without gradients; (B, T) each."""
    B, T = batch.completion_mask.shape
    logp = torch.zeros(B, T, device=batch.input_ids.device)
    entropy = torch.zeros(B, T, device=batch.input_ids.device) if with_entropy else None
    for rows in micro_batches(batch, micro_batch_size):
        mb = batch.select(rows)
        t = mb.completion_mask.shape[1]
        lp, ent = token_logprobs(model, mb, temperature=temperature, with_entropy=with_entropy)
        logp[rows, :t] = lp
        if entropy is not None:
            entropy[rows, :t] = ent
    return logp * batch.completion_mask, (entropy * batch.completion_mask if entropy is not None else None)
