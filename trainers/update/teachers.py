"""Step 6b of the algorithm, with a teacher section: each teacher's logprobs of the step's sampled tokens, the
per-token distillation signal (`algorithm.distill_signal`, trainers.algorithms.distillation) and its metrics.

A teacher is a frozen model on the trainer's devices, scored in the trainer's micro-batches through the same
no-grad logprob pass as the old and reference logprobs (`FrozenLogprobs`), or an OpenAI-compatible endpoint
asked for the logprobs of the very token ids the student sampled (the real `openai` client: completions with
the ids as the prompt, echo and logprobs, max_tokens 0, as vLLM's server answers). Either way its tokenizer
must be the student's: the same ids must mean the same tokens, or the "signal" compares unrelated tokens. A
model's tokenizer is compared with the student's (vocabulary and special tokens); an endpoint's is probed
(a spread of ids, the special tokens among them, must come back as the student's tokens), and each answer's
tokens are checked again.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch

from trainers.access import bound_to, key_server, key_server_variable
from trainers.algorithms.distillation import DISTILL_SIGNALS, distilled_advantages, reverse_kl, teacher_mean
from trainers.algorithms.masked import masked_mean
from trainers.spec import ModelSpec, RunSpec
from trainers.spec.teacher import TeacherModelSpec
from trainers.update.batches import TokenBatch
from trainers.update.frozen import FrozenLogprobs
from trainers.update.groups import Group
from trainers.update.lockstep import Lockstep
from trainers.update.micro_batching import MicroBatching
from trainers.update.step_batch import StepBatch

# Sequences per endpoint request, and requests in flight at once.
ENDPOINT_BATCH = 16
ENDPOINT_CONCURRENCY = 4
PROBE_IDS = 64  # ids spread over the vocabulary in an endpoint's tokenizer probe (special tokens besides)
KL_DIGITS = 4  # the per-token signal as the inspector stores it


class TeacherRefused(ValueError):
    """A teacher that cannot teach this student (another tokenizer, an endpoint that returns no logprobs)."""


class Teacher(Protocol):
    name: str

    def logprobs(self, tokens: TokenBatch) -> torch.Tensor:
        """(b, t) log pi_teacher of each completion token of `tokens`, 0 where its completion mask is 0."""
        ...


# ----------------------------------------------------------------- tokenizers


def tokenizer_mismatch(student, teacher) -> str | None:
    """Why `teacher`'s tokenizer does not give the student's ids the student's meaning, in words; None when it
    does. Compares the vocabularies (every token and its id, added tokens included) and the special tokens."""
    sv, tv = student.get_vocab(), teacher.get_vocab()
    if sv != tv:
        only_student = sorted(set(sv) - set(tv), key=sv.get)
        only_teacher = sorted(set(tv) - set(sv), key=tv.get)
        moved = sorted((t for t in set(sv) & set(tv) if sv[t] != tv[t]), key=sv.get)
        detail = [f"{len(tv)} tokens against the student's {len(sv)}"]
        if moved:
            detail.append(f"{moved[0]!r} is id {tv[moved[0]]} there, {sv[moved[0]]} here")
        if only_student:
            detail.append(f"{only_student[0]!r} (id {sv[only_student[0]]}) is the student's only")
        if only_teacher:
            detail.append(f"{only_teacher[0]!r} (id {tv[only_teacher[0]]}) is the teacher's only")
        return "its vocabulary differs from the student's (" + "; ".join(detail) + ")"
    for role in ("eos_token", "bos_token", "unk_token"):
        mine, theirs = getattr(student, role, None), getattr(teacher, role, None)
        if mine != theirs:
            return f"its {role.replace('_', ' ')} is {theirs!r}, the student's {mine!r}"
    if set(student.all_special_tokens) != set(teacher.all_special_tokens):
        extra = sorted(set(teacher.all_special_tokens) ^ set(student.all_special_tokens))
        return f"its special tokens differ from the student's ({', '.join(map(repr, extra[:5]))})"
    return None


def probe_ids(tokenizer) -> list[int]:
    """Ids an endpoint's tokenizer is checked on: the special tokens and a spread over the vocabulary."""
    size = len(tokenizer)
    spread = {round(i * (size - 1) / (PROBE_IDS - 1)) for i in range(PROBE_IDS)}
    return sorted(spread | {i for i in tokenizer.all_special_ids if 0 <= i < size})


# ----------------------------------------------------------------- a model on the trainer's devices


@dataclass
class ModelTeacher:
    """A frozen teacher model, scored through the trainer's no-grad logprob pass (not sharded: each process
    holds it whole and scores its own rows)."""

    name: str
    model: Any
    frozen: FrozenLogprobs

    @classmethod
    def load(cls, spec: TeacherModelSpec, model_spec: ModelSpec, student_tokenizer, frozen: FrozenLogprobs,
             device: torch.device) -> ModelTeacher:  # fmt: skip
        # deferred: loading pulls in transformers' model classes, which only a model teacher needs
        from trainers.models.loading import is_adapter_folder, load_causal_lm, load_tokenizer, require_model_folder

        path = str(spec.path)
        require_model_folder(path)  # a missing folder said plainly, not read as a hub id
        if is_adapter_folder(path):
            raise TeacherRefused(
                f"teacher {spec.name!r}: {path} holds LoRA adapters only; export that checkpoint merged (a "
                "transformers folder) and name the export"
            )
        tokenizer = load_tokenizer(path, trust_remote_code=model_spec.trust_remote_code)
        why = tokenizer_mismatch(student_tokenizer, tokenizer)
        if why:
            raise TeacherRefused(
                f"teacher {spec.name!r} ({path}) cannot teach this student: {why}. On-policy distillation scores "
                "the student's token ids with the teacher, so both must use one tokenizer"
            )
        model = load_causal_lm(path, model_spec, device)
        model.eval()
        model.requires_grad_(False)
        return cls(spec.name, model, frozen)

    def logprobs(self, tokens: TokenBatch) -> torch.Tensor:
        logp, _ = self.frozen(self.model, tokens)
        assert logp is not None
        return logp


# ----------------------------------------------------------------- an OpenAI-compatible endpoint


def endpoint_key(api_key_env: str, base_url: str) -> str:
    """The API key to send to `base_url` ("" for none): only to the server its operator set it for (as the
    judges', trainers.rewards.criteria.judging): PermissionError in words otherwise."""
    key = os.environ.get(api_key_env, "")
    if not key:
        return ""
    server = key_server(api_key_env)
    if not bound_to(base_url.rstrip("/") + "/completions", server):
        where = f"is set for {server}" if server else f"has no server ({key_server_variable(api_key_env)})"
        raise PermissionError(
            f"the API key in {api_key_env} {where}, not {base_url}: not sent; the workers' operator sets "
            f"{key_server_variable(api_key_env)} to the server the key is for, or the teacher names another "
            "variable (api_key_env)"
        )
    return key


class EndpointTeacher:
    """A teacher behind an OpenAI-compatible endpoint: POST /completions with the token ids as the prompt,
    echo and logprobs 0 and max_tokens 0, so the answer's logprobs are the teacher's of every token sent."""

    def __init__(self, spec: TeacherModelSpec, student_tokenizer) -> None:
        from openai import OpenAI  # deferred: the client (and httpx) only for an endpoint teacher

        self.name, self.spec, self.tokenizer = spec.name, spec, student_tokenizer
        key = endpoint_key(spec.api_key_env, str(spec.base_url))
        self.client = OpenAI(base_url=spec.base_url, api_key=key or "none", timeout=spec.timeout_s, max_retries=1)
        self._pieces: dict[int, str] = {}
        self.check_tokenizer()

    def piece(self, token_id: int) -> str:
        if token_id not in self._pieces:
            self._pieces[token_id] = self.tokenizer.decode([token_id])
        return self._pieces[token_id]

    def check_tokenizer(self) -> None:
        """The probe (the module docstring): refused in words when the endpoint's tokens are not the student's."""
        try:
            self.score([probe_ids(self.tokenizer)])
        except TeacherRefused:
            raise
        except Exception as exc:  # cannot reach it, or it answers something else: say so before any step
            raise TeacherRefused(
                f"teacher {self.name!r} at {self.spec.base_url}: {type(exc).__name__}: {exc}"
            ) from None

    def score(self, sequences: Sequence[list[int]]) -> list[list[float]]:
        """The teacher's logprob of every token of each sequence after its first (float per token), in order."""
        batches = [list(sequences[i : i + ENDPOINT_BATCH]) for i in range(0, len(sequences), ENDPOINT_BATCH)]
        with ThreadPoolExecutor(max_workers=max(1, min(len(batches), ENDPOINT_CONCURRENCY))) as pool:
            return [row for rows in pool.map(self._score_batch, batches) for row in rows]

    def _score_batch(self, sequences: list[list[int]]) -> list[list[float]]:
        response = self.client.completions.create(
            model=str(self.spec.model), prompt=sequences, max_tokens=0, echo=True, logprobs=0, temperature=1.0
        )
        choices = sorted(response.choices, key=lambda c: c.index)
        where = f"teacher {self.name!r} at {self.spec.base_url}"
        if len(choices) != len(sequences):
            raise TeacherRefused(f"{where} answered {len(choices)} choices for {len(sequences)} sequences")
        out = []
        for ids, choice in zip(sequences, choices, strict=True):
            lp = choice.logprobs
            if lp is None or lp.token_logprobs is None or lp.tokens is None:
                raise TeacherRefused(f"{where} returned no prompt logprobs (echo with logprobs): it cannot teach")
            if len(lp.token_logprobs) < len(ids) or len(lp.tokens) < len(ids):
                raise TeacherRefused(f"{where} scored {len(lp.token_logprobs)} tokens of {len(ids)} sent")
            for token_id, text in zip(ids, lp.tokens, strict=False):
                # A piece of a multi-byte character decodes to U+FFFD alone, and servers that detokenise
                # incrementally (vLLM) may show it otherwise: such pieces are not compared.
                if text != self.piece(token_id) and "\ufffd" not in text + self.piece(token_id):
                    raise TeacherRefused(
                        f"{where} cannot teach this student: its tokenizer differs (id {token_id} is {text!r} "
                        f"there, {self.piece(token_id)!r} here); both must use one tokenizer"
                    )
            values = lp.token_logprobs[1 : len(ids)]  # the first token has no logprob: nothing predicts it
            if not all(isinstance(v, int | float) and math.isfinite(v) and v <= 1e-4 for v in values):
                raise TeacherRefused(f"{where} returned logprobs that are not finite numbers at most 0")
            out.append([float(v) for v in values])
        return out

    def logprobs(self, tokens: TokenBatch) -> torch.Tensor:
        P = tokens.prompt_len
        mask = tokens.completion_mask
        sequences, spans = [], []
        for row in range(tokens.input_ids.shape[0]):
            real = tokens.attention_mask[row].bool()
            start = int(real[:P].logical_not().sum())  # left padding
            length = int(mask[row].sum())
            sequences.append(tokens.input_ids[row, start : P + length].tolist())
            spans.append((P - start, length))
        scored = self.score(sequences)
        out = torch.zeros(mask.shape, device=mask.device)
        for row, (values, (prompt_tokens, length)) in enumerate(zip(scored, spans, strict=True)):
            # values[i] is the logprob of sequence token i + 1: completion token j is sequence token prompt_tokens + j
            completion = values[prompt_tokens - 1 : prompt_tokens - 1 + length]
            out[row, :length] = torch.tensor(completion, device=mask.device)
        return out * mask


# ----------------------------------------------------------------- the step's signal


class Teachers:
    """A run's teachers and, for each, the rows it scores (route_field's values) and its weight."""

    def __init__(self, spec: RunSpec, teachers: list[Teacher], student_tokenizer) -> None:
        assert spec.teacher is not None
        self.spec, self.section, self.teachers = spec, spec.teacher, teachers
        self.signal_fn = DISTILL_SIGNALS.get(spec.algorithm.distill_signal)
        self.tokenizer = student_tokenizer

    @classmethod
    def from_spec(cls, spec: RunSpec, student_tokenizer, lockstep: Lockstep) -> Teachers | None:
        """The run's teachers, loaded (None without a teacher section); TeacherRefused in words when one cannot
        teach this student."""
        if spec.teacher is None:
            return None
        # Teachers are not sharded: their passes are each process's own, with nothing to agree on.
        frozen = FrozenLogprobs(
            MicroBatching.of(spec.optim), replace(lockstep, sharded=False), spec.rollout.temperature
        )
        loaded: list[Teacher] = []
        for t in spec.teacher.teachers:
            if t.base_url:
                loaded.append(EndpointTeacher(t, student_tokenizer))
            else:
                loaded.append(ModelTeacher.load(t, spec.model, student_tokenizer, frozen, lockstep.device))
        return cls(spec, loaded, student_tokenizer)

    def row_weights(self, groups: list[Group], device: torch.device) -> torch.Tensor:
        """(K, B) teacher k's weight on each episode of the step's batch (its order: group by group), 0 where
        teacher k does not score that row: routed teachers take the rows whose route_field value they list,
        the others every row no routed teacher claims."""
        section = self.section
        claimed = {v for t in section.teachers for v in (t.rows or [])}
        weights = torch.zeros(len(section.teachers), sum(len(g.episodes) for g in groups))
        b = 0
        for grp in groups:
            value = str(grp.prompt.row.fields.get(section.route_field)) if section.route_field else None
            for _ in grp.episodes:
                for k, t in enumerate(section.teachers):
                    if (value in t.rows) if t.rows is not None else (value not in claimed):
                        weights[k, b] = t.weight
                b += 1
        return weights.to(device)

    def apply(
        self, groups: list[Group], batch: StepBatch, student_logp: torch.Tensor, advantages: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """(B, T) the advantages with the teachers' term (trainers.algorithms.distillation.distilled_advantages),
        and the metrics: distill/reverse_kl (over every scored sampled token), distill/reverse_kl/<name> (over
        that teacher's), distill/rows_frac (rows some teacher scored), timing/teacher_s. Each episode keeps
        its per-token signal for the inspector (`Episode.teacher_tokens`)."""
        started = time.perf_counter()
        algo, mask = self.spec.algorithm, batch.mask
        weights = self.row_weights(groups, mask.device)  # (K, B)
        teacher_logps = torch.zeros((len(self.teachers), *mask.shape), device=mask.device)  # (K, B, T)
        metrics: dict[str, float] = {}
        for k, teacher in enumerate(self.teachers):
            rows = torch.nonzero(weights[k] > 0).squeeze(-1)
            if len(rows) == 0:
                continue
            part = batch.tokens.select(rows)
            teacher_logps[k, rows, : part.completion_mask.shape[1]] = teacher.logprobs(part)
            kl = reverse_kl(student_logp[rows], teacher_logps[k, rows], mask[rows])
            metrics[f"distill/reverse_kl/{teacher.name}"] = masked_mean(kl, mask[rows]).item()
        scored_by = mask.unsqueeze(0) * (weights > 0).unsqueeze(-1).to(mask.dtype)  # (K, B, T)
        # The plain reverse KL (metrics, inspector) and the signal that trains, each a weighted mean over teachers.
        kl, covered = teacher_mean(reverse_kl(student_logp.unsqueeze(0), teacher_logps, scored_by), weights)
        signal, _ = teacher_mean(torch.stack([self.signal_fn(student_logp, teacher_logps[k], scored_by[k])
                                              for k in range(len(self.teachers))]), weights)  # fmt: skip
        scored = mask * covered.unsqueeze(-1).to(mask.dtype)
        metrics["distill/reverse_kl"] = masked_mean(kl, scored).item() if scored.sum() > 0 else 0.0
        metrics["distill/rows_frac"] = covered.float().mean().item()
        self.keep_for_inspector(groups, kl, scored)
        out = distilled_advantages(advantages, signal, mask, coef=algo.distill_coef,
                                   reward_weight=algo.reward_advantage_weight)  # fmt: skip
        metrics["timing/teacher_s"] = time.perf_counter() - started
        return out, metrics

    def keep_for_inspector(self, groups: list[Group], signal: torch.Tensor, scored: torch.Tensor) -> None:
        """Each episode's [[token text, signal or None], ...] over its completion tokens (None where no teacher
        scored it: an observation token, or a row no teacher takes)."""
        values, where = signal.tolist(), scored.bool().tolist()
        b = 0
        for grp in groups:
            for ep in grp.episodes:
                ids = ep.completion_ids
                ep.teacher_tokens = [
                    [self.tokenizer.decode([tok]), round(values[b][i], KL_DIGITS) if where[b][i] else None]
                    for i, tok in enumerate(ids)
                ]
                b += 1
