"""The suite editor's and the launch form's fields, read from a POST body into what the API takes."""

from __future__ import annotations

from typing import Any

from studio.lib.params import as_id

# The task fields the editor shows, per task row ("task-<i>-<field>"), and how each is read.
TASK_IDS = ("dataset", "rubric", "environment")
TASK_INTS = ("samples_per_prompt", "num_prompts", "max_new_tokens")
TASK_FLOATS = ("pass_threshold", "temperature", "top_p")
MAX_ROWS = 64


def read_suite(post) -> tuple[dict[str, Any], dict[str, str]]:
    """({team, name, description, seed, tasks, rollout}, {field: why} for values that are not numbers). A task row
    whose name is empty is left out (the editor always shows one empty row to add a task with)."""
    errors: dict[str, str] = {}
    tasks = []
    for i in range(MAX_ROWS):
        name = post.get(f"task-{i}-name", "").strip()
        if not name:
            continue
        task: dict[str, Any] = {"name": name}
        for field in TASK_IDS:
            if value := post.get(f"task-{i}-{field}", "").strip():
                task[field] = as_id(value) if as_id(value) is not None else value
        if (task_kind := post.get(f"task-{i}-procedural", "").strip()) and "dataset" not in task:
            task["procedural"] = {"task": task_kind}
        for fields, kind in ((TASK_INTS, int), (TASK_FLOATS, float)):
            for field in fields:
                raw = post.get(f"task-{i}-{field}", "").strip()
                if not raw:
                    continue
                try:
                    task[field] = kind(raw)
                except ValueError:
                    errors[f"tasks.{len(tasks)}.{field}"] = f"{raw[:20]!r} is not a number"
        tasks.append(task)
    rollout: dict[str, Any] = {"engine": post.get("engine") or "transformers"}
    for field, kind in (("max_new_tokens", int), ("temperature", float)):
        raw = post.get(field, "").strip()
        if raw:
            try:
                rollout[field] = kind(raw)
            except ValueError:
                errors[f"rollout.{field}"] = f"{raw[:20]!r} is not a number"
    seed = post.get("seed", "0").strip() or "0"
    data = {"team": as_id(post.get("team")), "name": post.get("name", ""), "description": post.get("description", ""),
            "seed": int(seed) if seed.isdigit() else seed, "tasks": tasks, "rollout": rollout}  # fmt: skip
    return data, errors


def read_launch(post) -> dict[str, Any]:
    """{checkpoints: [ids], base_models: [paths], name} from the launch form (one base model path per line)."""
    checkpoints = [as_id(v) for v in post.getlist("checkpoints")]
    base = [line.strip() for line in post.get("base_models", "").splitlines() if line.strip()]
    return {"checkpoints": [c for c in checkpoints if c is not None], "base_models": base,
            "name": post.get("name", "").strip()}  # fmt: skip
