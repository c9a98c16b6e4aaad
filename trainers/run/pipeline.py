"""Asynchronous rollouts: generation runs ahead of training, feeding a bounded queue of scored groups.

    generator thread:  draw prompts -> sample (with the sampler's own weights, one request at a time) ->
                       hand finished groups to the scorer -> draw more, while admission allows
    scorer thread:     score each batch of finished groups as soon as it is handed over (streaming
                       rewards: a group is scored when its last completion finishes, while the rest
                       generate) -> the queue
    trainer (caller):  `take` the next groups (dropping, and counting, those holding a token more than
                       max_staleness versions old) -> train -> new weights into the sampler through
                       `gate.update()`, between two of its requests (no drain beyond the one in progress)

A policy version is the number of optimiser updates applied to the weights; every sampled token records
the version of the weights that sampled it (`Turn.versions`), and a step training from version s sees
token lags s - v. Two rules keep lags within max_staleness = S (AReaL's admission, arXiv:2505.24298):

- admission: the generator starts a group only while started < max(consumed_at_sync + (S + 1) * P,
  consumed + P), where P is the step's groups and `consumed_at_sync` the groups the trainer had taken
  when the sampler got its current weights. The first term is AReaL's bound with consumption in place
  of versions x P (a step that draws more than P groups, under dynamic sampling, frees as many); the
  second lets a trainer that has taken everything admitted get P fresh groups rather than wait forever.
  Over-provisioning widens how many groups are in flight at once (P x over_provision), not this budget:
  extra groups started beyond it would only be dropped when the generator is the faster side.
- the drop rule: whatever admission let through (groups finishing out of order under partial rollouts),
  `take` drops a group whose oldest token is older than s - S: the bound holds for every trained token.

Without partial rollouts one request samples whole completions for up to P groups (new weights wait for
it to end); with them, a request samples one segment of every completion in flight (trainers.rollout.
partial), so new weights wait at most one segment and unfinished completions go on with them.

The sampler's weights: the transformers engine samples from a whole copy of the policy that the trainer
refreshes; vLLM holds its own, and the trainer pushes each update into it inside `gate.update()` (not at
the generator's next request, when the trainer would be changing them), so the version stamped on a
request's tokens is the one vLLM held, and vLLM's logprobs are their behaviour logprobs. Where the
overlap is real: the generator is a thread of the trainer's process, so with the transformers engine, or
colocated vLLM on the trainer's one GPU, generation and training time-share that device (and Python's
lock); the gain there is that neither waits for the other's slowest part. With the vLLM server
(`rollout.vllm_server_url`) on a device of its own, generation runs in another process and truly
overlaps training. vLLM samples whole completions so far: partial rollouts need the transformers engine.

What it gives up: which groups a step gets depends on timing, and the generator's sampling shares
torch's global random stream with the trainer's thread, so an asynchronous run is not bit-reproducible.
A checkpoint saves the trainer's state; the queue and the completions in flight are not saved: a
resumed run regenerates them from the resumed weights (the prompts they had drawn are skipped).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from trainers.curriculum.budgets import Allocation
from trainers.data.prompts import Prompt
from trainers.episodes import Episode
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.generate import ScoredGroup, run_episodes
from trainers.rollout.partial import PartialGroup, sample_segment
from trainers.spec import AsyncSpec, EnvironmentSpec

G = TypeVar("G", bound=ScoredGroup)

Draw = Callable[[int], tuple[list[Prompt], Allocation]]  # n -> (prompts, their group sizes)
Score = Callable[[list[Prompt], list[list[Episode]]], list]  # (prompts, episodes per prompt) -> scored groups


class SamplerGate:
    """The sampler's weights: the generator holds them for one request at a time; an update (or anything
    that needs the sampler to itself: validation, a checkpoint) that is waiting goes before its next request,
    so the generator cannot starve the trainer by asking again at once."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._updates_waiting = 0
        self.last_wait_s = 0.0  # how long the last `update` waited for the request in progress

    @contextmanager
    def request(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._busy and self._updates_waiting == 0)
            self._busy = True
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def update(self) -> Iterator[None]:
        started = time.perf_counter()
        with self._cond:
            self._updates_waiting += 1
            self._cond.wait_for(lambda: not self._busy)
            self._updates_waiting -= 1
            self._busy = True
        self.last_wait_s = time.perf_counter() - started
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()


def too_stale(oldest_version: int | None, trained_version: int, max_staleness: int) -> bool:
    """Whether a group whose oldest token was sampled by `oldest_version` is too old to train from
    `trained_version` (None: no version recorded, never stale)."""
    return oldest_version is not None and trained_version - oldest_version > max_staleness


def oldest_version(group: ScoredGroup) -> int | None:
    versions = [v for ep in group.episodes if (v := ep.oldest_version) is not None]
    return min(versions) if versions else None


@dataclass
class Taken(Generic[G]):
    """What one step took from the queue."""

    kept: list[G]  # to train on
    examined: list[G]  # every group taken and not dropped (kept ones included), in order
    dropped_stale: int  # groups dropped for holding a token older than max_staleness
    queue_depth: int  # groups waiting when the step came to take
    wait_s: float  # seconds the trainer waited for groups


@dataclass
class Counters:
    """Running totals the trainer turns into per-step deltas."""

    engine_s: float = 0.0  # seconds inside engine requests
    score_s: float = 0.0  # seconds scoring
    sampled_tokens: int = 0
    dropped_stale: int = 0


class Pipeline(Generic[G]):
    """The generator and scorer threads and the queue between them and the trainer (see the module doc).
    `start()` once, `take()` each step, `weights_updated()` inside `gate.update()` after each update,
    `close()` at the end. Errors in either thread are raised by the next `take`."""

    def __init__(
        self, settings: AsyncSpec, *, groups_per_step: int, version: int, engine: RolloutEngine, tokenizer,
        params: SamplingParams, draw: Draw, score: Score, environment: EnvironmentSpec | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.per_step = groups_per_step
        # Over-provisioned groups in flight beyond one step's (partial rollouts only: the spec refuses it otherwise).
        self.extra = max(0, round(groups_per_step * settings.over_provision) - groups_per_step)
        self.engine, self.tokenizer, self.params, self.environment = engine, tokenizer, params, environment
        self.draw, self.score = draw, score
        self.gate = SamplerGate()
        self.version = version
        self.counters = Counters()
        self._cond = threading.Condition()
        self._queue: deque[G] = deque()
        self._started = 0  # groups drawn by the generator
        self._consumed = 0  # groups taken by the trainer (dropped ones included)
        self._consumed_at_sync = 0
        self._stopped = False
        self._error: BaseException | None = None
        self._flight: list[PartialGroup] = []  # groups sampled segment by segment (partial rollouts)
        self._scorer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scorer")
        self._thread = threading.Thread(target=self._produce, name="generator", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # ---------------------------------------------------------------- trainer side

    def take(self, count: int, max_examined: int, trained_version: int, keep: Callable[[G], bool]) -> Taken[G]:
        """The next groups for a step training from `trained_version`: up to `count` kept ones (`keep`), having
        examined at most `max_examined`; waits for the generator as needed."""
        started = time.perf_counter()
        kept: list[G] = []
        examined: list[G] = []
        dropped = 0
        with self._cond:
            depth = len(self._queue)
            while len(kept) < count and len(examined) < max_examined:
                self._cond.wait_for(lambda: self._queue or self._error is not None or self._stopped)
                self._raise_error()
                if not self._queue:  # stopped
                    break
                group = self._queue.popleft()
                self._consumed += 1
                self._cond.notify_all()  # the generator may admit more
                if too_stale(oldest_version(group), trained_version, self.settings.max_staleness):
                    dropped += 1
                    self.counters.dropped_stale += 1
                    continue
                examined.append(group)
                if keep(group):
                    kept.append(group)
        return Taken(kept, examined, dropped, depth, time.perf_counter() - started)

    def weights_updated(self, version: int) -> None:
        """The sampler now holds `version`; call inside `gate.update()`, right after the weights went in."""
        with self._cond:
            self.version = version
            self._consumed_at_sync = self._consumed
            self._cond.notify_all()

    @property
    def queue_depth(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self) -> None:
        """Stop both threads; the request in progress and the scoring in progress finish first."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        self._scorer.shutdown(wait=True, cancel_futures=True)

    # ---------------------------------------------------------------- generator side

    def _allowance(self) -> int:
        """The groups the generator may have started by now (see the module doc); under `_cond`."""
        S, P = self.settings.max_staleness, self.per_step
        return max(self._consumed_at_sync + (S + 1) * P, self._consumed + P)

    def _admit(self, wanted: int, block: bool) -> int:
        """Start up to `wanted` groups; waits for at least one when `block`. Returns how many (0 when stopped)."""
        with self._cond:
            if block:
                self._cond.wait_for(lambda: self._stopped or self._started < self._allowance())
            if self._stopped:
                return 0
            n = max(0, min(wanted, self._allowance() - self._started))
            self._started += n
            return n

    def produce_once(self) -> None:
        """One request's work of the generator: a round of whole groups, or one segment of the groups in flight.
        The generator thread calls it in a loop; a test may drive a pipeline it has not started by hand."""
        if self.settings.partial_rollouts:
            self._produce_segment()
        else:
            self._produce_round()

    def _produce(self) -> None:
        try:
            while not self._stopped:
                self.produce_once()
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer, which raises it in `take`
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _produce_round(self) -> None:
        """Whole completions for up to one step's groups, in one request, with the sampler's weights."""
        n = self._admit(self.per_step, block=True)
        if not n:
            return
        prompts, allocation = self.draw(n)
        with self.gate.request():
            version, t0 = self.version, time.perf_counter()
            episodes = run_episodes(self.engine, self.tokenizer, prompts, allocation.sizes, self.params,
                                    self.environment, chunk=allocation.chunk)  # fmt: skip
            self.counters.engine_s += time.perf_counter() - t0
        for group in episodes:
            for ep in group:
                ep.stamp_version(version)
                self.counters.sampled_tokens += ep.sampled_tokens
        self._scorer.submit(self._score, prompts, episodes)

    def _produce_segment(self) -> None:
        """One segment of every completion in flight, after topping the flight up to one step's groups plus
        the over-provisioned ones; finished groups go to the scorer at once."""
        flight = self._flight
        n = self._admit(self.per_step + self.extra - len(flight), block=not flight)
        if n:
            prompts, allocation = self.draw(n)
            flight += [PartialGroup(p, size) for p, size in zip(prompts, allocation.sizes, strict=True)]
        if not flight:
            return
        with self.gate.request():
            t0 = time.perf_counter()
            self.counters.sampled_tokens += sample_segment(
                self.engine, flight, self.params, self.settings.segment_tokens, self.version
            )
            self.counters.engine_s += time.perf_counter() - t0
        finished = [g for g in flight if g.finished]
        if finished:
            self._flight = [g for g in flight if not g.finished]
            self._scorer.submit(
                self._score, [g.prompt for g in finished], [g.episodes(self.tokenizer) for g in finished]
            )

    def _score(self, prompts: list[Prompt], episodes: list[list[Episode]]) -> None:
        try:
            t0 = time.perf_counter()
            groups = self.score(prompts, episodes)
            self.counters.score_s += time.perf_counter() - t0
            with self._cond:
                self._queue.extend(groups)
                self._cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer, which raises it in `take`
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"asynchronous rollouts failed: {self._error}") from self._error


def async_metrics(episodes: list[Episode], trained_version: int, max_staleness: int) -> dict[str, float]:
    """Staleness of the trained episodes, from the version of each sampled token (trained from
    `trained_version`): `async/staleness_mean|max` over tokens, `async/staleness_<k>` rollouts whose oldest
    token is k versions old and `async/tokens_lag_<k>` tokens k versions old, k = 0..max_staleness (all
    reported, zeros too, so the curves stay continuous), and `async/partial_frac` the share of rollouts
    sampled by more than one version (partial rollouts continued after an update)."""
    lags = [trained_version - v for ep in episodes for v in (ep.token_versions or ()) if v >= 0]
    oldest = [trained_version - v for ep in episodes if (v := ep.oldest_version) is not None]
    spans = [ep.version_spans() or [] for ep in episodes]
    out = {
        "async/staleness_mean": sum(lags) / len(lags) if lags else 0.0,
        "async/staleness_max": float(max(lags, default=0)),
        "async/partial_frac": sum(len(s) > 1 for s in spans) / len(spans) if spans else 0.0,
    }
    for k in range(max_staleness + 1):
        out[f"async/staleness_{k}"] = float(sum(lag == k for lag in oldest))
        out[f"async/tokens_lag_{k}"] = float(sum(lag == k for lag in lags))
    return out
