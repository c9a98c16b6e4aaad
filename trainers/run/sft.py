"""A small supervised warm-up (cold start) before RL: cross-entropy on the assistant's tokens of
example conversations, nothing else trained on. `warm_start` is the plain loop (the tiny agent
demo's); `cold_start` shares the examples' common prefix (the tools prompt) as a KV cache, which
makes a step several times cheaper; `warmed` runs a run's `warm_up` section with it before RL.

Agent RL starts from a model that already knows the tool format (ReTool's cold-start SFT); this
gives the tiny model that start on a CPU in seconds. Each conversation is laid out as an episode is
in training: the prompt through the chat template with the assistant turn opened, then each
assistant turn's tokens (trained on, its end-of-turn token included) and what followed it
(rendered, never trained on), each piece tokenised on its own as the rollout does.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainers.data.readers import DataError, read_records
from trainers.episodes import Message
from trainers.models.quiet import quiet_transformers
from trainers.report import Reporter
from trainers.spec import RunSpec, WarmUpSpec


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


def padded_batch(batch: Sequence[tuple[list[int], list[int]]], pad: int, device=None):
    """Encoded examples (`encode_example`) right-padded into (ids, attention, loss mask), each (B, T):
    positions past an example's end are out of attention and loss."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch], device=device)
    attention = torch.tensor([[1] * len(m) + [0] * (width - len(m)) for _, m in batch], device=device)
    mask = torch.tensor([m + [0] * (width - len(m)) for _, m in batch], dtype=torch.bool, device=device)
    return ids, attention, mask


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
        ids, attention, mask = padded_batch(batch, pad)  # (B, T) each
        mask = mask.float()
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


# ------------------------------------------------------------------ the cold start of a run (spec.warm_up)

COLD_START_MARKER = "cold-start.json"  # written last: a folder without it is an interrupted cold start
WARM_UP_DIR = "warm-up"  # under the run's output folder


def conversations(spec: WarmUpSpec) -> list[list[Message]]:
    """The example conversations of `spec.path`: each row's `messages_field`, a list of messages with a
    text role and content (other keys, as a tool message's name, kept); DataError naming the row otherwise."""
    out = []
    for row, record in read_records(spec.path):
        value = record.get(spec.messages_field)
        if isinstance(value, str):  # a CSV cell holds the list as JSON text
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = None
        if (
            not isinstance(value, list)
            or not value
            or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in value
            )
        ):
            raise DataError(f"{Path(spec.path).name} row {row}: field {spec.messages_field!r} must be a list of "
                            '{"role", "content"} messages')  # fmt: skip
        if not any(m["role"] == "assistant" for m in value):
            raise DataError(f"{Path(spec.path).name} row {row}: the conversation has no assistant message to learn")
        out.append(value)
    if not out:
        raise DataError(f"{Path(spec.path).name}: no conversations to warm up on")
    return out


def warmed(spec: RunSpec, reporter: Reporter) -> RunSpec:
    """`spec` itself without a `warm_up` section; else the cold start of `spec.model.path` on the section's
    conversations (`cold_start`), written to the run's output folder (`WARM_UP_DIR`), and `spec` with that
    model as its model. A folder holding a finished cold start of the same settings (a resumed run) is
    reused. The reporter's log says what it does and the losses."""
    from trainers.scale.distributed import dist_info  # deferred: imports torch (this module's demo callers must not)

    w = spec.warm_up
    if w is None:
        return spec
    if dist_info().enabled:  # the spec refuses it; a launch that set the process count afterwards gets here
        raise ValueError("the cold start (warm_up) runs in one process: launch this run as one process")
    out = Path(spec.checkpoint.output_dir) / WARM_UP_DIR
    settings = {"from": spec.model.path, "path": w.path, "messages_field": w.messages_field, "steps": w.steps,
                "batch_size": w.batch_size, "lr": w.lr, "seed": spec.optim.seed}  # fmt: skip
    done = _finished(out)
    if done is not None and all(done.get(k) == v for k, v in settings.items()):
        reporter.log(f"cold start: reusing the model in {out}")
    else:
        examples = conversations(w)
        reporter.log(f"cold start: {w.steps} steps of {w.batch_size} conversations (of {len(examples)} in "
                     f"{Path(w.path).name}), lr {w.lr:g}, before RL")  # fmt: skip
        cold_start(spec.model.path, examples, out, steps=w.steps, lr=w.lr, seed=spec.optim.seed,
                   batch_size=w.batch_size, about=settings)  # fmt: skip
        done = _finished(out) or {}
        losses = done.get("losses") or [float("nan")]
        reporter.log(f"cold start: done in {done.get('seconds', 0):.0f} s, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
                     "RL starts from it")  # fmt: skip
    model = spec.model.model_copy(update={"path": str(out)})
    return spec.model_copy(update={"model": model})


def _finished(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / COLD_START_MARKER).read_text())
    except (OSError, ValueError):
        return None


def cold_start(
    model_path: str | Path,
    examples: list[list[Message]],
    out_dir: str | Path,
    *,
    steps: int,
    lr: float,
    seed: int = 0,
    batch_size: int = 8,
    device: str | None = None,
    marker: str = COLD_START_MARKER,
    about: dict[str, Any] | None = None,
) -> Path:
    """`warm_start`'s loss (cross-entropy on the assistant's tokens, each conversation laid out as a
    rollout lays it out: `encode_example`) with the prefix every example shares (a tools prompt and
    its schemas, say) run once per step without a gradient, as a KV cache the batch attends to. The
    loss is the same; only the gradient through the shared prefix's keys and values is left out, which
    makes a step several times cheaper on a CPU when the prefix is most of each example. Logits are
    computed only where the loss reads them. Writes the model (float32), its tokenizer and last
    `marker` (the settings, `about` among them, each step's loss and the seconds it took); returns `out_dir`."""
    import torch  # deferred: the studio imports this module's callers for their names, without torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # deferred, as torch

    from trainers.models.loading import default_device  # deferred: imports torch

    started = time.perf_counter()
    with quiet_transformers():  # no "Loading weights" bar in a run's log
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        where = torch.device(device) if device else default_device()
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(where)
    encoded = [encode_example(tokenizer, list(messages)) for messages in examples]
    shared = shared_prefix_length(encoded)
    prefix = torch.tensor([encoded[0][0][:shared]], device=where)  # (1, P)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    body, head = model.base_model, model.get_output_embeddings()
    losses = []
    model.train()
    for _ in range(steps):
        batch = [(ids[shared:], mask[shared:]) for ids, mask in rng.choices(encoded, k=batch_size)]
        ids, attention, mask = padded_batch(batch, pad, where)  # (B, S) each
        cache = None
        if shared:
            with torch.no_grad():
                cache = body(input_ids=prefix, use_cache=True).past_key_values  # the current weights' prefix
            cache.batch_repeat_interleave(batch_size)
            attention = torch.cat([attention.new_ones(batch_size, shared), attention], dim=1)
        hidden = body(input_ids=ids, attention_mask=attention, past_key_values=cache).last_hidden_state  # (B, S, H)
        trained = mask[:, 1:]  # (B, S-1): position t predicts ids[:, t + 1]
        logits = head(hidden[:, :-1][trained])  # (N, V), only the N trained targets
        loss = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][trained])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(round(loss.item(), 4))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / marker).unlink(missing_ok=True)  # a cold start of other settings is being replaced
    # float32: the bf16 a packaged model comes in would round most of a short fine-tune's updates away.
    with quiet_transformers():  # no "Writing model shards" bar
        model.to("cpu").save_pretrained(out)
        tokenizer.save_pretrained(out)
    record = {
        "from": str(model_path),
        "examples": len(examples),
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        **(about or {}),
        "device": str(where),
        "shared_prefix_tokens": shared,
        "losses": losses,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / marker).write_text(json.dumps(record, indent=1) + "\n")
    return out


def shared_prefix_length(encoded: list[tuple[list[int], list[int]]]) -> int:
    """Tokens every example starts with, less one, and never into a trained token: the last prefix
    position's prediction (of the first suffix token) is never needed."""
    first = encoded[0][0]
    shared = len(first)
    for ids, mask in encoded:
        same = next((i for i, (a, b) in enumerate(zip(first, ids, strict=False)) if a != b), min(len(first), len(ids)))
        shared = min(shared, same, mask.index(1))
    return max(0, shared - 1)
