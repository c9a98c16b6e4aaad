"""The rubric editor: criteria rendered from each kind's parameter schema, read back from the
POST, and the "try it" pairs (typed, or a dataset row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studio.accounts import permissions as perms
from studio.datasets.files import iter_rows
from studio.datasets.models import Dataset
from studio.lib import json_limits
from studio.lib.schema_form import fields_for, read_fields
from trainers.rewards.catalog import CRITERION_KINDS

KIND_NAMES = list(CRITERION_KINDS)


def criteria_fields(spec: dict[str, Any], errors: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for i, criterion in enumerate(spec.get("criteria", [])):
        kind = criterion.get("kind") if criterion.get("kind") in CRITERION_KINDS else KIND_NAMES[0]
        schema = CRITERION_KINDS.get(kind).model_json_schema()
        params = fields_for(schema, schema, f"c{i}.params.", criterion.get("params") or {},
                            {k.replace(f"spec.criteria.{i}.params.", f"c{i}.params."): v for k, v in errors.items()})  # fmt: skip
        out.append({"index": i, "name": criterion.get("name", ""), "kind": kind, "weight": criterion.get("weight", 1.0),
                    "doc": (CRITERION_KINDS.get(kind).__doc__ or "").strip(), "params": params,
                    "error": " ".join(v for k, v in errors.items() if k.startswith(f"spec.criteria.{i}") and ".params." not in k)})  # fmt: skip
    return out


MAX_CRITERIA = 200  # criteria one editor form may hold


def read_rubric(post) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(rubric spec, {name, description, team}, parse errors) from the editor's POST."""
    criteria, errors = [], {}
    raw_count = post.get("count", "") or "0"
    count = int(raw_count) if raw_count.isascii() and raw_count.isdigit() and len(raw_count) < 5 else -1
    if not 0 <= count <= MAX_CRITERIA:  # not what the editor sends: read none rather than loop on a huge count
        errors["count"] = f"must be the number of criteria, 0 to {MAX_CRITERIA}, got {raw_count[:20]!r}"
        count = 0
    for i in range(count):
        kind = post.get(f"c{i}.kind", KIND_NAMES[0])
        criterion: dict[str, Any] = {"name": post.get(f"c{i}.name", ""), "kind": kind}
        try:
            criterion["weight"] = float(post.get(f"c{i}.weight", "1") or 1)
        except ValueError:
            errors[f"spec.criteria.{i}.weight"] = "must be a number"
        if kind in CRITERION_KINDS and post.get(f"c{i}.shown_kind") == kind:
            schema = CRITERION_KINDS.get(kind).model_json_schema()
            values, parse_errors = read_fields(fields_for(schema, schema, f"c{i}.params.", {}, {}), post)
            criterion["params"] = values.get(f"c{i}", {}).get("params", {})
            errors.update(
                {k.replace(f"c{i}.params.", f"spec.criteria.{i}.params."): v for k, v in parse_errors.items()}
            )
        criteria.append(criterion)
    spec: dict[str, Any] = {"criteria": criteria, "combine": post.get("combine", "weighted_sum")}
    if post.get("formula"):
        spec["formula"] = post["formula"]
    if post.get("pass_threshold"):
        try:
            spec["pass_threshold"] = float(post["pass_threshold"])
        except ValueError:
            errors["spec.pass_threshold"] = "must be a number"
    meta = {"name": post.get("name", ""), "description": post.get("description", ""), "team": post.get("team")}
    return spec, meta, errors


def trial_pairs(trial: dict[str, str], post, user) -> list[dict[str, Any]]:
    """Pairs for "try it": typed prompt/answer, or a dataset row, with completions separated by '---' lines."""
    text = trial["completions"].replace("\r\n", "\n")  # browsers submit textarea lines as CRLF
    completions = [c.strip("\n") for c in text.split("\n---\n") if c.strip()]
    if not completions:
        raise ValueError("type at least one completion (separate several with a line of ---)")
    try:
        fields = json_limits.loads(trial["fields"] or "{}")
    except ValueError as exc:  # not JSON, or past a limit of studio.lib.json_limits
        raise ValueError(f"extra fields: not valid JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ValueError('extra fields: must be a JSON object, like {"level": 3}')
    base: dict[str, Any] = {
        "prompt": trial["prompt"],
        **({"answer": trial["answer"]} if trial["answer"] else {}),
        **fields,
    }
    if post.get("try_dataset") and post.get("try_row"):
        dataset = perms.get_for(user, Dataset.objects.all(), post["try_dataset"])
        base = dataset_row(dataset, int(post["try_row"]))
    return [{**base, "completion": c} for c in completions]


def dataset_row(dataset: Dataset, number: int) -> dict[str, Any]:
    for row, record in iter_rows(Path(dataset.path), dataset.format, dataset.split):
        if row == number:
            if isinstance(record, Exception):
                raise ValueError(f"row {number}: {record}")
            pair = {k: v for k, v in record.items()}
            prompt_key = dataset.messages_field or dataset.prompt_field
            pair["prompt" if not dataset.messages_field else "messages"] = record.get(prompt_key)
            if dataset.answer_field:
                pair["answer"] = record.get(dataset.answer_field)
            return pair
    raise ValueError(f"the dataset has no row {number}")
