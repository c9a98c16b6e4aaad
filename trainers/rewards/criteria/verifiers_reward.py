"""verifiers: one reward function or metric of a verifiers environment, computed by the package's
own code (the task's `score(trace)`) in its sandboxed process, for the whole batch in one call.

Each of a run's `verifiers` criteria names one function (the run's start expands an empty name into
one criterion per function, with the package's weights: trainers.rollout.environments.packages.
prepare); they all share the run's host, which scores a batch once and answers the others from it.
A sample without its task (a row not from the taskset), a task whose scoring raised, or a batch the
sandbox could not score is 0 with the reason, never a crash.
"""

from __future__ import annotations

from trainers.report import CriterionScore
from trainers.rewards.catalog import VerifiersRewardParams
from trainers.rewards.criteria.base import CRITERIA, Criterion, failure
from trainers.rewards.sample import Sample
from trainers.rollout.environments.catalog import VerifiersParams

TASK_FIELD = "verifiers_task"  # the row's index in the taskset (rows written by prepare)


@CRITERIA.register("verifiers")
class VerifiersReward(Criterion):
    params_model = VerifiersRewardParams
    params: VerifiersRewardParams
    runs_elsewhere = True

    def __init__(self, params: VerifiersRewardParams) -> None:
        super().__init__(params)
        if not params.function or not params.environment:
            raise ValueError(
                "a verifiers criterion is completed when a run with a verifiers environment starts (its function "
                "and environment); here it has none"
            )
        self.environment = VerifiersParams.model_validate(params.environment)

    def score_batch(self, samples: list[Sample]) -> list[CriterionScore]:
        from trainers.rollout.environments.packages.verifiers_host import host_for  # starts processes: on use only

        scores: list[CriterionScore | None] = [None] * len(samples)
        items: list[tuple[int, str]] = []
        where: list[int] = []
        for i, sample in enumerate(samples):
            task = sample.fields.get(TASK_FIELD)
            if type(task) is not int or task < 0:
                scores[i] = failure(f"the row has no {TASK_FIELD} (it is not one of the environment's tasks)")
            else:
                items.append((task, sample.completion))
                where.append(i)
        try:
            verdicts = host_for(self.environment).score(items) if items else []
        except Exception as exc:  # not installed, not loaded: every sample of the batch says why
            verdicts = []
            for i in where:
                scores[i] = failure(f"{type(exc).__name__}: {exc}")
        for i, verdict in zip(where, verdicts, strict=True):
            scores[i] = self._one(verdict)
        return [s if s is not None else failure("not scored") for s in scores]

    def _one(self, verdict) -> CriterionScore:
        name = self.params.function
        if verdict.error:
            return failure(verdict.error)
        if name in verdict.rewards:
            score, weight = verdict.rewards[name]
            return CriterionScore(score, f"{name} = {score:g} (weight {weight:g} in the package)")
        if name in verdict.metrics:
            return CriterionScore(verdict.metrics[name], f"metric {name} = {verdict.metrics[name]:g}")
        return failure(f"the task recorded no reward or metric {name!r}")
