"""verifiers: a verifiers 0.4 taskset package, installed into a virtual environment of its own.

verifiers 0.4 (`verifiers.v1`) splits an environment into a Taskset (the tasks: a prompt, a system
prompt, task fields such as an answer) and the task's scoring (`@vf.reward` functions with weights,
`@vf.metric`s), with agents (harnesses that call a model themselves) in between. The studio drives
the model with its own engines, so an episode here is the model's reply to the task's prompt: the
prompt comes from the run's dataset, which is the taskset's tasks (`data.environment_dataset`, see
trainers.rollout.environments.packages.prepare), and the rubric's `verifiers` criteria score the
reply with the task's own functions, one criterion each, in the package's sandboxed process.
Nothing of the package runs in this process: reset and step below read nothing it wrote.
"""

from __future__ import annotations

from typing import Any

from trainers.rollout.environments.base import ENVIRONMENTS, Environment, EnvironmentStart, StepResult
from trainers.rollout.environments.catalog import VerifiersParams


@ENVIRONMENTS.register("verifiers")
class VerifiersEnvironment(Environment):
    params_model = VerifiersParams
    params: VerifiersParams

    def reset(self, row: dict[str, Any]) -> EnvironmentStart:
        return EnvironmentStart(messages=row["messages"])

    def step(self, text: str) -> StepResult:
        return StepResult(done=True, answered=True)
