"""A small supervised warm-up (cold start) before RL: cross-entropy on the assistant's tokens of
example conversations, nothing else trained on.

Agent RL starts from a model that already knows the tool format (ReTool's cold-start SFT); this
gives the tiny model that start on a CPU in seconds. Each conversation is laid out as an episode is
in training: the prompt through the chat template with the assistant turn opened, then each
assistant turn's tokens (trained on, its end-of-turn token included) and what followed it
(rendered, never trained on), each piece tokenised on its own as the rollout does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from trainers.episodes import Message


def _render(tokenizer, messages: list[Message], opened: bool) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=opened, tokenize=False)


def assistant_segments(tokenizer, messages: list[Message]) -> list[tuple[str, bool]]:
    """The conversation as (text, trained) pieces whose concatenation is its rendering: each
    assistant message's content and end-of-turn marker are trained, the rest is not. Raises
    `ValueError` when the chat template does not render conversations prefix by prefix."""
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, message in enumerate(messages):
        trained = message["role"] == "assistant"
        stops = [_render(tokenizer, messages[:i], opened=True)] if trained else []
        stops.append(_render(tokenizer, messages[: i + 1], opened=False))
        for at, text in enumerate(stops):
            if not text.startswith(done):
                raise ValueError(f"the chat template does not render message {i} after the ones before it")
            piece, flag = text[len(done) :], trained and at == len(stops) - 1
            if pieces and not flag and not pieces[-1][1]:  # what the model reads between its turns: one piece
                pieces[-1] = (pieces[-1][0] + piece, False)
            elif piece:
                pieces.append((piece, flag))
            done = text
    return pieces


def encode_example(tokenizer, messages: list[Message]) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of one conversation; the mask is 1 on assistant tokens."""
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in assistant_segments(tokenizer, messages):
        piece = tokenizer(text, add_special_tokens=False).input_ids
        ids += piece
        mask += [int(trained)] * len(piece)
    if not any(mask):
        raise ValueError("an example has no assistant message to learn from")
    return ids, mask


def warm_start(
    model_path: str | Path,
    examples: Sequence[list[Message]],
    out_dir: str | Path,
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
    batch_size: int = 32,
) -> Path:
    """Fine-tune `model_path` on `examples` (conversations) for `steps` AdamW steps of
    `batch_size` examples drawn at random; write the model and tokenizer to `out_dir`, return it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not examples:
        raise ValueError("warm_start needs at least one example")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    encoded = [encode_example(tokenizer, list(messages)) for messages in examples]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    pad = tokenizer.pad_token_id
    model.train()
    for _ in range(steps):
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        width = max(len(ids) for ids, _ in batch)
        # Right padding: positions past an example's end are masked out of attention and loss.
        ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])  # (B, T)
        attention = torch.tensor([[1] * len(m) + [0] * (width - len(m)) for _, m in batch])  # (B, T)
        mask = torch.tensor([m + [0] * (width - len(m)) for _, m in batch], dtype=torch.float32)  # (B, T)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]  # (B, T-1, V): predicts ids[:, 1:]
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, T-1)
        loss = (nll * mask[:, 1:]).sum() / mask[:, 1:].sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
