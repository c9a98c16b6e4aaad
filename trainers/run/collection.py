"""Steps 1-3 of the algorithm (`GroupCollector`): the step's scored groups, synchronous or from the
asynchronous pipeline's queue; dynamic sampling (drop groups whose rewards all agree, draw more), hints
for groups that all failed, IGPO's information-gain turn rewards, and every scored group's verdicts into
the curriculum's prompt statistics.

The curriculum and the data position are shared with the asynchronous generator thread, which draws
prompts too: `data_lock` guards them, and `exclusive()` holds the generator off while the weights move,
validation samples or a checkpoint is written."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace

import torch

from trainers.algorithms.info_gain import apply_info_gain
from trainers.curriculum.budgets import Allocation
from trainers.curriculum.hints import Hinter
from trainers.curriculum.state import Curriculum
from trainers.data.procedural.source import ProceduralSource
from trainers.data.prompts import Prompt, cut_prompts_warning, load_prompts
from trainers.data.source import PromptSource
from trainers.episodes import Episode
from trainers.rewards.rubric import Rubric
from trainers.rollout.engines.base import RolloutEngine, SamplingParams
from trainers.rollout.generate import ScoredGroup, generate_and_score, score_groups
from trainers.rollout.progress import GenerationProgress, counted
from trainers.run.pipeline import Counters, Pipeline, Taken, async_metrics
from trainers.run.validation import split_prompts
from trainers.scale.distributed import DistInfo, any_process, gathered_lists, shard, sum_over_processes
from trainers.spec import RunSpec
from trainers.update.groups import Group, shape_groups


def training_prompts(
    spec: RunSpec, tokenizer, warn: Callable[[str], None] = lambda message: None
) -> tuple[PromptSource | ProceduralSource, list[Prompt]]:
    """The run's training prompts as the collector draws them (a source that keeps the data position), and
    the held-out prompts validation draws from; `warn` hears of prompts cut to max_prompt_tokens."""
    if spec.data.procedural is not None:  # generated prompts at a level the run adapts (RLVE)
        # Validation draws from the task's held-out problems (load_rows of a generated task),
        # which never share a prompt with the training pool.
        source = ProceduralSource(spec.data, tokenizer, seed=spec.optim.seed)
        return source, split_prompts(spec, tokenizer, load_prompts(spec.data, tokenizer))[1]
    prompts = load_prompts(spec.data, tokenizer)
    if (cut := cut_prompts_warning(prompts, tokenizer, spec.data)) is not None:
        warn(cut)
    prompts, held_out = split_prompts(spec, tokenizer, prompts)  # held-out rows never train
    return PromptSource(prompts, seed=spec.optim.seed, shuffle=spec.data.shuffle), held_out


@dataclass
class Collected:
    """What a step collected: the groups kept for training (with a signal, under dynamic sampling), every
    group generated (the first round's first: the step's reward metrics are that round's), the rounds
    drawn, and the step's timings so far (generate, score, tool)."""

    kept: list[Group]
    generated: list[Group]
    rounds: int
    timings: dict[str, float]
    info_gain_metrics: dict[str, float] = field(default_factory=dict)
    taken: Taken[Group] | None = None  # asynchronous: what the pipeline's queue gave
    counters_before: Counters | None = None  # asynchronous: the pipeline's counters when it was asked


class GroupCollector:
    def __init__(
        self, spec: RunSpec, *, dist: DistInfo, device: torch.device, local_prompts: int, engine: RolloutEngine,
        tokenizer, rubric: Rubric, curriculum: Curriculum, source: PromptSource | ProceduralSource,
        hinter: Hinter | None, sampling: SamplingParams, sampling_model: torch.nn.Module, steps_done: Callable[[], int],
    ) -> None:  # fmt: skip
        self.spec = spec
        self.dist = dist
        self.device = device
        self.local_prompts = local_prompts  # this process's share of prompts_per_step
        self.engine = engine
        self.tokenizer = tokenizer
        self.rubric = rubric
        self.curriculum = curriculum
        self.source = source
        self.hinter = hinter
        self.sampling = sampling
        self.sampling_model = sampling_model  # IGPO's passes run on it (a whole copy when the policy is sharded)
        self.steps_done = steps_done  # the run's updates so far, as the scorer thread finds them
        self.data_lock = threading.RLock()  # the data position and curriculum: the generator draws too
        self.pipeline: Pipeline[Group] | None = None  # asynchronous: started with the first step
        self.pipeline_rubric: Rubric | None = None  # the scorer thread's own (criteria may keep state per thread)
        # How far a synchronous step's sampling is, in the run's log (the trainer sets it; issue 39); single-turn only:
        # a multi-turn round samples turns, not completions.
        self.progress: GenerationProgress | None = None

    def collect(self, step: int) -> Collected:
        """The groups of step `step` + 1, by the run's mode (synchronous, or from the pipeline)."""
        timings: dict[str, float] = {"generate": 0.0, "score": 0.0}
        if self.spec.rollout.asynchronous.runs_ahead:
            return self._take(step, timings)
        return self._collect(step, timings)

    # ------------------------------------------------------------------ synchronous

    def _collect(self, step: int, timings: dict[str, float]) -> Collected:
        """The curriculum's sampler draws the prompts, its budget sizes their groups, and every scored group
        updates its prompt's statistics. With dynamic sampling, groups whose rewards all agree carry no
        signal (zero advantage) and are dropped; more prompts are drawn until the batch is full or
        `dynamic_sampling_max_rounds` is reached (DAPO, arXiv:2503.14476, section 3.2)."""
        algo, n_prompts = self.spec.algorithm, self.spec.optim.prompts_per_step
        found = Collected([], [], 0, timings)
        max_rounds = algo.dynamic_sampling_max_rounds if algo.dynamic_sampling else 1
        # Under several processes every one draws each round's prompts, generating only while it
        # still needs groups: their data positions stay in step and their shards never overlap.
        while found.rounds < max_rounds and any_process(len(found.kept) < self.local_prompts, self.dist, self.device):
            found.rounds += 1
            prompts = shard(self.curriculum.draw(n_prompts), self.dist)
            groups = self.generate_and_score(prompts, step, found) if len(found.kept) < self.local_prompts else []
            self._observe(groups, step)
            found.generated.extend(groups)
            groups = self.with_hints(groups, step, found)
            found.kept.extend(g for g in groups if g.has_spread or not algo.dynamic_sampling)
        return found

    def with_hints(self, groups: list[Group], step: int, found: Collected) -> list[Group]:
        """Hints (opt-in, trainers.curriculum.hints): each group whose samples all failed is sampled
        again with the start of its reference solution opening the answer, and its last retry takes
        its place in training, with its own advantage baseline. The retries join `found.generated` (after
        the round's groups: the step's reward metrics stay those of the unhinted first round)."""
        if self.hinter is None:
            return groups
        # A retry has the group size of the group it replaces, whatever the budget gave this round.
        chunk = self.spec.curriculum.generation_chunk
        groups, hinted = self.hinter.retry(
            groups, lambda prompts, sizes: self.generate_and_score(prompts, step, found, Allocation(sizes, chunk))
        )
        found.generated.extend(hinted)
        return groups

    def _observe(self, groups: list[Group], step: int) -> None:
        """Each scored group's pass verdicts into the prompt statistics, every process's groups on
        every process (collective), so each process's curriculum chooses what the others' do."""
        verdicts = [(grp.prompt.id, self.curriculum.passes(grp.results)) for grp in groups]
        self.curriculum.observe(step + 1, gathered_lists(verdicts, self.dist))

    def generate_and_score(
        self, prompts: list[Prompt], step: int, found: Collected, allocation: Allocation | None = None
    ) -> list[Group]:
        """Groups of `prompts` (sized by the curriculum's budget, or `allocation`), sampled by the weights of
        version `step`, scored and shaped; their generate/score seconds added to `found.timings`."""
        algo = self.spec.algorithm
        allocation = allocation or self.curriculum.allocate(prompts)  # each prompt's group size
        what = f"step {step + 1}" + (f" (round {found.rounds})" if found.rounds > 1 else "")
        with counted(self.progress if self.spec.environment is None else None, what, sum(allocation.sizes)):
            scored = generate_and_score(
                self.engine, self.rubric, prompts, allocation.sizes, self.sampling, found.timings,
                tokenizer=self.tokenizer, environment=self.spec.environment, chunk=allocation.chunk,
            )  # fmt: skip
        episodes = [ep for s in scored for ep in s.episodes]
        for ep in episodes:
            ep.stamp_version(step)  # sampled by the weights this step trains from
        if algo.info_gain_weight > 0:  # IGPO (opt-in): information-gain turn rewards, before they are summed below
            t0 = time.perf_counter()
            gains = apply_info_gain(self.sampling_model, self.tokenizer, episodes, weight=algo.info_gain_weight,
                                    answer_field=algo.info_gain_answer_field, batch_size=self.spec.optim.micro_batch_size,
                                    gain=algo.info_gain_type)  # fmt: skip
            found.timings["score"] += time.perf_counter() - t0
            # Reported for the step's first round, as the reward metrics are.
            found.info_gain_metrics = found.info_gain_metrics or gains
        return self._shaped(scored)

    def _shaped(self, scored: list[ScoredGroup]) -> list[Group]:
        return shape_groups(scored, self.spec.algorithm, self.spec.token_bounds.after_prompt)

    # ------------------------------------------------------------------ asynchronous

    def _take(self, step: int, timings: dict[str, float]) -> Collected:
        """The step's groups from the pipeline's queue (trainers.run.pipeline); groups holding a token more
        than max_staleness versions older than the weights trained from are dropped there. Dynamic sampling
        examines up to its rounds' worth of groups for ones whose rewards differ."""
        algo, count = self.spec.algorithm, self.local_prompts
        pipeline = self._pipeline(step)
        before = replace(pipeline.counters)
        rounds = algo.dynamic_sampling_max_rounds if algo.dynamic_sampling else 1
        taken: Taken[Group] = pipeline.take(
            count, count * rounds, step, lambda grp: grp.has_spread or not algo.dynamic_sampling
        )
        return Collected(taken.kept, taken.examined, math.ceil(len(taken.examined) / count), timings,
                         taken=taken, counters_before=before)  # fmt: skip

    def _pipeline(self, version: int) -> Pipeline[Group]:
        """The asynchronous pipeline, started at the first step (after a resume, from the resumed weights)."""
        if self.pipeline is None:
            self.engine.sync_weights()  # version `version`, before the generator (and the trainer) goes on
            self.pipeline_rubric = Rubric.from_spec(self.spec.rubric)
            self.pipeline = Pipeline(
                self.spec.rollout.asynchronous, groups_per_step=self.local_prompts, version=version,
                engine=self.engine, tokenizer=self.tokenizer, params=self.sampling, draw=self._draw,
                score=self._score_finished, environment=self.spec.environment,
            )  # fmt: skip
            self.pipeline.start()
        return self.pipeline

    def _draw(self, n: int) -> tuple[list[Prompt], Allocation]:
        """The generator's next `n` prompts and their group sizes (from the generator thread)."""
        with self.data_lock:
            prompts = self.curriculum.draw(n)
            return prompts, self.curriculum.allocate(prompts)

    def _score_finished(self, prompts: list[Prompt], episodes: list[list[Episode]]) -> list[Group]:
        """Finished groups scored and shaped (from the scorer thread); their verdicts reach the curriculum."""
        assert self.pipeline_rubric is not None
        groups = self._shaped(score_groups(self.pipeline_rubric, prompts, episodes, self.spec.environment))
        with self.data_lock:
            self._observe(groups, self.steps_done())
        return groups

    def async_metrics(self, found: Collected, train_groups: list[Group], step: int) -> dict[str, float]:
        """`async/*` of step `step` just taken (its timings complete): staleness of what it trained on, groups
        dropped for staleness, the queue, and how busy the engine and the trainer were over the step's wall
        time. The engine's and the scorer's seconds in the step window become `timing/generate_s` and
        `timing/score_s`."""
        assert self.pipeline is not None and found.taken is not None and found.counters_before is not None
        timings, now, before, taken = found.timings, self.pipeline.counters, found.counters_before, found.taken
        timings["generate"] = now.engine_s - before.engine_s
        timings["score"] = now.score_s - before.score_s
        step_s = max(timings["step"], 1e-9)
        waited = taken.wait_s + self.pipeline.gate.last_wait_s
        episodes = [ep for grp in train_groups for ep in grp.episodes]
        return async_metrics(episodes, step - 1, self.spec.rollout.asynchronous.max_staleness) | {
            "async/dropped_stale": float(taken.dropped_stale),
            "async/dropped_stale_total": float(now.dropped_stale),
            "async/queue_depth": float(taken.queue_depth),
            "async/policy_version": float(step - 1),
            "async/engine_busy": min(1.0, timings["generate"] / step_s),
            "async/trainer_busy": max(0.0, 1.0 - waited / step_s),
            "timing/wait_s": waited,
        }

    # ------------------------------------------------------------------ around the step

    def adapt_difficulty(self, generated: list[Group]) -> dict[str, float]:
        """A procedural run: the step's pass rate (over every process) moves the difficulty of
        the next step's prompts; returns `procedural/difficulty` and `procedural/pass_rate`."""
        if not isinstance(self.source, ProceduralSource):
            return {}
        # The model's own pass rate: a hinted retry was given part of the answer, so it does not count.
        unhinted = [r for grp in generated if grp.prompt.hint is None for r in grp.results]
        passes = self.curriculum.passes(unhinted)  # the one pass rule
        counts = torch.tensor([float(sum(passes)), float(len(passes))], device=self.device)
        passed, total = sum_over_processes(counts, self.dist).tolist()
        with self.data_lock:
            return self.source.observe(int(passed), int(total))

    def exclusive(self) -> AbstractContextManager:
        """A context holding the sampler (and the data position) away from the asynchronous generator: for
        the weight update, validation and checkpoints. Synchronous, there is nobody to hold it from."""
        if self.pipeline is None:
            return nullcontext()
        return _both(self.pipeline.gate.update(), self.data_lock)

    def weights_updated(self, version: int) -> None:
        """The sampler holds weights of `version` now: what the pipeline samples from here on is stamped so."""
        if self.pipeline is not None:
            self.pipeline.weights_updated(version)

    def close(self) -> None:
        if self.pipeline is not None:
            self.pipeline.close()
        if self.pipeline_rubric is not None:
            self.pipeline_rubric.close()


@contextmanager
def _both(first: AbstractContextManager, second: AbstractContextManager) -> Iterator[None]:
    with first, second:
        yield
