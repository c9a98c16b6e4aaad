"""A run's settings once its verifiers environment is there: called at the run's start, by the
worker's trainer process (never the web process), before anything reads the data or the rubric.

- the package is installed into its own virtual environment when missing (venvs.ensure_installed),
  and its taskset loaded in the sandbox (verifiers_host);
- `data.environment_dataset`: the taskset's tasks, checked and cut, are written as a JSON Lines file
  in the package's folder and become the run's dataset (messages, answer, and `verifiers_task`, the
  task's index the criteria score it by);
- each `verifiers` criterion without a function becomes one criterion per reward function, weighted
  by its weight in the package times the criterion's, and one per metric with weight 0 (shown in the
  inspector, not in the reward); every `verifiers` criterion gets the run's environment settings.

A run without a verifiers environment is returned as it is (refused in words when it asks for one).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from trainers.rewards.criteria.verifiers_reward import TASK_FIELD
from trainers.rollout.environments.catalog import VerifiersParams
from trainers.rollout.environments.packages.verifiers_host import Description, VerifiersHost, host_for
from trainers.spec import RunSpec


def prepared(spec: RunSpec, log: Callable[[str], None] = lambda line: None) -> RunSpec:
    uses_criteria = any(c.kind == "verifiers" for c in spec.rubric.criteria)
    if spec.environment is None or spec.environment.kind != "verifiers":
        if spec.data.environment_dataset or uses_criteria:
            raise ValueError("data.environment_dataset and verifiers criteria need a verifiers environment (the run has "
                             "none)")  # fmt: skip
        return spec
    params = VerifiersParams.model_validate(spec.environment.params)
    host = host_for(params, log)
    config = spec.model_dump(mode="json")
    if spec.data.environment_dataset:
        config["data"].update(_dataset(host, params))
    description = host.describe()
    log(f"verifiers environment {params.package}=={params.version}: {description.tasks} tasks, rewards "
        + ", ".join(f"{n} (weight {w:g})" for n, w in description.rewards))  # fmt: skip
    config["rubric"]["criteria"] = _criteria(config["rubric"]["criteria"], description, spec.environment.params)
    return RunSpec.model_validate(config)


def _dataset(host: VerifiersHost, params: VerifiersParams) -> dict[str, Any]:
    """The data settings reading the taskset's tasks from a file in the package's folder (written whole
    under a name of its content's settings, then moved into place)."""
    rows = host.rows()
    key = hashlib.sha256(json.dumps([params.module(), params.config, params.max_rows], sort_keys=True).encode())
    folder = host.package.folder / "datasets"
    folder.mkdir(exist_ok=True)
    path = folder / f"{key.hexdigest()[:16]}.jsonl"
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    os.replace(partial, path)
    return {"path": str(path), "format": "jsonl", "messages_field": "messages", "answer_field": "answer",
            "extra_fields": [TASK_FIELD], "environment_dataset": False}  # fmt: skip


def _criteria(criteria: list[dict[str, Any]], description: Description, environment: dict[str, Any]) -> list[dict]:
    taken = {c["name"] for c in criteria if not (c["kind"] == "verifiers" and not c["params"]["function"])}
    out = []
    for c in criteria:
        if c["kind"] != "verifiers":
            out.append(c)
            continue
        if c["params"]["function"]:
            out.append({**c, "params": {**c["params"], "environment": c["params"]["environment"] or environment}})
            continue
        weighted = [*description.rewards, *((m, 0.0) for m in description.metrics)]
        for function, weight in weighted:
            name = function if function not in taken else f"{c['name']}_{function}"[:64]
            taken.add(name)
            out.append({"name": name, "kind": "verifiers", "weight": c["weight"] * weight,
                        "params": {"function": function, "environment": environment}})  # fmt: skip
    return out
