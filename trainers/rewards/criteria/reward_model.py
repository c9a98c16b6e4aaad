"""reward_model: a sequence-classification reward model scores each (prompt, completion).

The pair is rendered with the model's chat template (the prompt's messages, or the prompt text as
the user turn, then the completion as the assistant turn; a multi-turn episode's whole transcript),
message contents tokenised as text so a completion cannot forge the template's special tokens, and
scored in batches of `batch_size`, right-padded (a causal model's real tokens never see the padding,
so a sequence's score does not depend on its batch), on the worker's device (CUDA when there is
one). The model reads the logit at the last real token, as `*ForSequenceClassification` models do.
A sequence longer than `max_length` loses its start: the end is what the head reads.

The model is loaded once per process and kept (torch and transformers are imported only then). A
folder whose config is not a sequence-classification model, or whose head weights are missing, is
refused unless `allow_untrained_head` (a head initialised from seed 0, for testing the plumbing). A
hub id is fetched only when the workers can reach the Hub; otherwise the error says so in one line
(trainers.models.hub). A model that cannot load scores every sample 0 with the reason.

Score mapping (`score`): sigmoid(logit), the raw logit, or minmax (logit_min -> 0, logit_max -> 1,
clipped).
"""

from __future__ import annotations

import math
import threading
from typing import Any

from trainers.data.prompts import spans_ids, template_spans
from trainers.report import CriterionScore
from trainers.rewards.catalog import RewardModelParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, describe, failure
from trainers.rewards.sample import Sample

HEAD_SEED = 0  # an untrained head is initialised from this seed, so every process gets the same one

_MODELS: dict[tuple[str, str, bool], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


class NotARewardModel(ValueError):
    """A folder that holds no trained sequence-classification head."""


def mapped(logit: float, params: RewardModelParams) -> float:
    """The score for a logit, by `params.score` (see the module docstring)."""
    if params.score == "raw":
        return logit
    if params.score == "sigmoid":
        # Written for both signs so a large |logit| never overflows exp().
        return 1.0 / (1.0 + math.exp(-logit)) if logit >= 0 else math.exp(logit) / (1.0 + math.exp(logit))
    return min(max((logit - params.logit_min) / (params.logit_max - params.logit_min), 0.0), 1.0)


def load_reward_model(params: RewardModelParams) -> tuple[Any, Any]:
    """(model in eval mode on the default device, tokenizer), loaded once per process."""
    key = (params.model, params.dtype, params.allow_untrained_head)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = _load(params)
        return _MODELS[key]


def _load(params: RewardModelParams) -> tuple[Any, Any]:
    import torch  # torch + transformers, only when a reward model is first used
    from transformers import AutoConfig, AutoModelForSequenceClassification

    # torch
    from trainers.models.loading import (
        DTYPES,
        default_device,
        from_pretrained,
        load_tokenizer,
        require_model_folder,
    )
    from trainers.models.quiet import quiet_transformers  # with transformers, as above

    path = params.model
    require_model_folder(path)
    config = from_pretrained(AutoConfig, path)
    architectures = list(getattr(config, "architectures", None) or [])
    classifier = any(a.endswith("ForSequenceClassification") for a in architectures)
    if not classifier and not params.allow_untrained_head:
        raise NotARewardModel(
            f"{path} is not a sequence-classification model (its config names {', '.join(architectures) or 'none'}): "
            "give a reward model, or set allow_untrained_head to test the plumbing with an untrained head"
        )
    extra = {} if classifier else {"num_labels": 1}
    with quiet_transformers():  # the "newly initialised weights" warning is ours to word
        model, info = from_pretrained(
            AutoModelForSequenceClassification, path, dtype=DTYPES[params.dtype], output_loading_info=True, **extra
        )
    missing = [k for k in info.get("missing_keys", []) if k]
    if missing and not params.allow_untrained_head:
        raise NotARewardModel(f"{path} lacks the classification head's weights ({', '.join(sorted(missing)[:3])})")
    if missing:
        generator = torch.Generator().manual_seed(HEAD_SEED)
        std = float(getattr(model.config, "initializer_range", 0.02))
        with torch.no_grad():
            for name in sorted(missing):
                weight = model.get_parameter(name)
                fresh = (
                    torch.zeros(weight.shape)
                    if name.endswith("bias")
                    else torch.randn(weight.shape, generator=generator) * std
                )
                weight.copy_(fresh.to(weight.dtype))
    tokenizer = load_tokenizer(path)
    if model.config.pad_token_id is None:  # the head finds each sequence's last real token by the pad id
        model.config.pad_token_id = tokenizer.pad_token_id
    model.to(default_device()).eval()
    return model, tokenizer


def encode(tokenizer: Any, sample: Sample, max_length: int) -> tuple[list[int], bool]:
    """(token ids of the prompt and completion as the reward model reads them, whether the start was cut)."""
    prompt = list(sample.prompt) if isinstance(sample.prompt, list) else [{"role": "user", "content": sample.prompt}]
    after = sample.transcript or [{"role": "assistant", "content": sample.completion}]
    if getattr(tokenizer, "chat_template", None):
        ids = spans_ids(tokenizer, template_spans(tokenizer, prompt + after, add_generation_prompt=False))
    else:
        text = "\n\n".join(m["content"] for m in prompt + after)
        ids = tokenizer(text, split_special_tokens=True).input_ids
    if len(ids) > max_length:
        return ids[-max_length:], True
    return ids, False


def logits(model: Any, tokenizer: Any, sequences: list[list[int]], label_index: int, batch_size: int) -> list[float]:
    """The reward logit of each token sequence, `batch_size` at a time, right-padded."""
    import torch

    pad = model.config.pad_token_id
    labels = model.config.num_labels
    if label_index >= labels:
        raise ValueError(f"label_index {label_index} is out of range: the model has {labels} output(s)")
    device = next(model.parameters()).device
    out: list[float] = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start : start + batch_size]
        width = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, seq in enumerate(chunk):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        with torch.inference_mode():
            found = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        out.extend(found[:, label_index].float().cpu().tolist())
    return out


@CRITERIA.register("reward_model")
class RewardModel(Criterion):
    params_model = RewardModelParams
    params: RewardModelParams

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        p = self.params
        try:
            model, tokenizer = load_reward_model(p)
        except Exception as exc:  # a model that cannot load fails every sample, with the reason
            return [failure(f"reward model {p.model!r} cannot load: {describe(exc)}") for _ in samples]
        encoded: list[tuple[list[int], bool] | Exception] = []
        for sample in samples:
            try:
                encoded.append(encode(tokenizer, sample, p.max_length))
            except Exception as exc:  # a prompt the template cannot render fails that sample only
                encoded.append(exc)
        ready = [e for e in encoded if not isinstance(e, Exception)]
        try:
            found = iter(logits(model, tokenizer, [ids for ids, _ in ready], p.label_index, p.batch_size))
        except Exception as exc:  # out of memory, a bad label index: every sample, with the reason
            return [failure(f"reward model {p.model!r} failed: {describe(exc)}") for _ in samples]
        how = {"raw": "raw logit", "sigmoid": "sigmoid", "minmax": f"minmax [{p.logit_min:g}, {p.logit_max:g}]"}
        scores = []
        for e in encoded:
            if isinstance(e, Exception):
                scores.append(failure(describe(e)))
                continue
            ids, cut = e
            logit = next(found)
            value = mapped(logit, p)
            note = f"; the first tokens cut to fit {p.max_length}" if cut else ""
            scores.append(
                CriterionScore(value, f"logit {logit:.4g} -> {how[p.score]} {value:.4g} ({len(ids)} tokens{note})")
            )
        return scores
