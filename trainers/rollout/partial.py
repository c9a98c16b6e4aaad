"""Partial rollouts: single-turn completions sampled a segment at a time, so new weights can reach the
engine between segments and a completion unfinished when a step has its groups goes on with them.

Each segment is one engine request per kind of work: the first segment of every new group (its prompt
prefilled once for its samples) and one per token allowance for the completions going on (context =
prompt + every token so far, never re-tokenised, as a multi-turn turn). Every token keeps the engine's
logprob and the policy version that sampled it, so the trainer corrects each token against its own
behaviour policy (trainers.algorithms.mismatch).

A group is finished when all its completions are: each ended on EOS ("stop") or reached max_new_tokens
("length"). Stop strings are not used (a string could straddle two segments): the spec refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from trainers.data.prompts import Prompt
from trainers.episodes import Episode
from trainers.rollout.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rollout.generate import single_turn_episode


@dataclass
class Completion:
    """One completion while it is sampled: its tokens so far, their logprobs and versions."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish_reason: str | None = None  # set when finished: "stop" | "length"

    def extend(self, gen: Generation, version: int, max_new_tokens: int) -> None:
        self.token_ids += gen.token_ids
        self.logprobs += gen.logprobs if gen.logprobs is not None else [0.0] * len(gen.token_ids)
        self.versions += [version] * len(gen.token_ids)
        if gen.finish_reason == "stop":  # the engine stopped on EOS, not on the segment's allowance
            self.finish_reason = "stop"
        elif len(self.token_ids) >= max_new_tokens or not gen.token_ids:
            self.finish_reason = "length"


@dataclass
class PartialGroup:
    """The `size` completions of one prompt, sampled a segment at a time."""

    prompt: Prompt
    size: int
    completions: list[Completion] = field(default_factory=list)

    @property
    def started(self) -> bool:
        return bool(self.completions)

    @property
    def finished(self) -> bool:
        return self.started and all(c.finish_reason is not None for c in self.completions)

    def episodes(self, tokenizer) -> list[Episode]:
        """The finished completions as episodes, each turn carrying its tokens' logprobs and versions."""
        out = []
        for c in self.completions:
            text = tokenizer.decode(c.token_ids, skip_special_tokens=True)
            gen = Generation(list(c.token_ids), text, list(c.logprobs), c.finish_reason or "length")  # type: ignore[arg-type]
            episode = single_turn_episode(self.prompt, gen)
            episode.turns[0].versions = list(c.versions)
            out.append(episode)
        return out


def sample_segment(
    engine: RolloutEngine, groups: list[PartialGroup], params: SamplingParams, segment_tokens: int, version: int
) -> int:
    """Sample the next segment (at most `segment_tokens` tokens) of every unfinished completion of `groups`
    with the engine's current weights, recorded as `version`; returns the tokens sampled. `params` must ask
    for logprobs (the trainer's correction needs each token's behaviour logprob)."""
    budget = params.max_new_tokens
    sampled = 0
    new_by_size: dict[int, list[PartialGroup]] = {}
    for grp in groups:
        if not grp.started:
            new_by_size.setdefault(grp.size, []).append(grp)
    for size, fresh in new_by_size.items():
        gens = engine.generate(
            [g.prompt.token_ids for g in fresh], size, replace(params, max_new_tokens=min(segment_tokens, budget))
        )
        for grp, samples in zip(fresh, gens, strict=True):
            grp.completions = [Completion() for _ in samples]
            for completion, gen in zip(grp.completions, samples, strict=True):
                completion.extend(gen, version, budget)
                sampled += len(gen.token_ids)
    # Completions going on, by the tokens they may still sample (usually one allowance: the segment's).
    fresh_ids = {id(g) for f in new_by_size.values() for g in f}
    by_allowance: dict[int, list[tuple[PartialGroup, Completion]]] = {}
    for grp in groups:
        if id(grp) in fresh_ids:
            continue
        for c in grp.completions:
            if c.finish_reason is None:
                by_allowance.setdefault(min(segment_tokens, budget - len(c.token_ids)), []).append((grp, c))
    for allowance, items in by_allowance.items():
        contexts = [grp.prompt.token_ids + c.token_ids for grp, c in items]
        gens = engine.generate(contexts, 1, replace(params, max_new_tokens=allowance))
        for (_, completion), (gen,) in zip(items, gens, strict=True):
            completion.extend(gen, version, budget)
            sampled += len(gen.token_ids)
    return sampled
