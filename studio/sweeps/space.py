"""The settings a sweep varies, chosen from the experiment's own schema (the fields of the experiment form,
studio.experiments.forms), checked, and turned into Optuna's distributions (or a grid's values).

A parameter is a dict:

    {"name": "optim.lr", "kind": "float", "low": 1e-5, "high": 1e-2, "log": true}
    {"name": "algorithm.group_size", "kind": "int", "low": 2, "high": 8, "step": 2}
    {"name": "algorithm.advantage_estimator", "kind": "choice", "choices": ["grpo", "rloo"]}

A float range on a grid sweep is tried at `points` values (linear or log spaced, default 3).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from studio.experiments.forms import experiment_sections  # the experiment form's own fields
from studio.lib.errors import FieldErrors
from studio.lib.schema_form import FormField

FLOAT, INT, CHOICE = "float", "int", "choice"
KINDS = (FLOAT, INT, CHOICE)
MAX_PARAMETERS = 12
MAX_CHOICES = 64
DEFAULT_GRID_POINTS = 3
MAX_GRID = 10_000  # combinations a grid may hold


class SpaceError(FieldErrors, ValueError):
    """Parameters the schema or the rules refuse, as {"parameters[i].field": why} (the API answers 400)."""


@lru_cache(maxsize=1)
def sweepable_fields() -> dict[str, FormField]:
    """{dotted name: its form field} for every setting of the experiment form a sweep may vary: numbers,
    integers, selects and switches (never the paths and free text a run also reads)."""
    out = {}
    for _, fields in experiment_sections({}, {}):
        for f in fields:
            if f.widget in ("number", "select", "checkbox"):
                out[f.name] = f
    return out


def kind_of(f: FormField) -> str:
    """The parameter kind a form field is swept as."""
    if f.widget == "number":
        return INT if f.kind == "integer" else FLOAT
    return CHOICE


def choices_of(f: FormField) -> list[Any]:
    """The values a select or switch may take (a nullable select's "" left out: none is not a value to try)."""
    if f.widget == "checkbox":
        return [True, False]
    return [c for c in f.choices if c != ""]


def check(parameters: Any, sampler: str) -> list[dict[str, Any]]:
    """The parameters, normalised (numbers as numbers, defaults filled); SpaceError naming each bad field."""
    if not isinstance(parameters, list) or not parameters:
        raise SpaceError({"parameters": "choose at least one setting to vary (a list of parameters)"})
    if len(parameters) > MAX_PARAMETERS:
        raise SpaceError({"parameters": f"at most {MAX_PARAMETERS} settings per sweep, got {len(parameters)}"})
    fields = sweepable_fields()
    out, errors, seen = [], {}, set()
    for i, raw in enumerate(parameters):
        where = f"parameters[{i}]"
        if not isinstance(raw, dict):
            errors[where] = "must be an object with name and kind"
            continue
        name = raw.get("name")
        if name not in fields:
            errors[f"{where}.name"] = (f"{name!r} is not a setting a sweep can vary: a number, integer, choice or "
                                       "switch of the experiment's settings, such as optim.lr")  # fmt: skip
            continue
        if name in seen:
            errors[f"{where}.name"] = f"{name} is varied twice"
            continue
        seen.add(name)
        try:
            out.append(_checked(raw, fields[name], sampler))
        except ValueError as exc:
            field, _, why = str(exc).partition(": ")
            errors[f"{where}.{field}"] = why
    if errors:
        raise SpaceError(errors)
    if sampler == "grid" and (size := math.prod(len(v) for v in grid(out).values())) > MAX_GRID:
        raise SpaceError({"parameters": f"the grid holds {size} combinations; at most {MAX_GRID}"})
    return out


def _checked(raw: dict[str, Any], f: FormField, sampler: str) -> dict[str, Any]:
    kind = kind_of(f)
    if raw.get("kind", kind) != kind:
        raise ValueError(f"kind: {f.name} is swept as {kind!r}, not {raw.get('kind')!r}")
    if kind == CHOICE:
        allowed = choices_of(f)
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"choices: give the values to try, from: {', '.join(map(str, allowed))}")
        bad = [c for c in choices if c not in allowed]
        if bad:
            raise ValueError(f"choices: {bad[0]!r} is not a choice of {f.name}; choices: {', '.join(map(str, allowed))}")
        if len(set(map(str, choices))) != len(choices) or len(choices) > MAX_CHOICES:
            raise ValueError(f"choices: each value once, at most {MAX_CHOICES}")
        return {"name": f.name, "kind": kind, "choices": choices}
    low, high = _number(raw, "low", kind), _number(raw, "high", kind)
    if not low < high:
        raise ValueError(f"high: must be above low ({low:g})")
    if f.minimum is not None and low < f.minimum:
        raise ValueError(f"low: {f.name} is at least {f.minimum:g}")
    if f.maximum is not None and high > f.maximum:
        raise ValueError(f"high: {f.name} is at most {f.maximum:g}")
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise ValueError("log: must be true or false")
    if log and low <= 0:
        raise ValueError("low: a log range starts above 0")
    out = {"name": f.name, "kind": kind, "low": low, "high": high, "log": log}
    if kind == INT:
        step = raw.get("step", 1)
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise ValueError("step: a whole number, 1 or more")
        if log and step != 1:
            raise ValueError("step: a log range of integers takes step 1")
        out["step"] = step
    elif sampler == "grid":
        points = raw.get("points", DEFAULT_GRID_POINTS)
        if not isinstance(points, int) or isinstance(points, bool) or not 2 <= points <= 100:
            raise ValueError("points: how many values of the range a grid tries, 2 to 100")
        out["points"] = points
    return out


def _number(raw: dict[str, Any], key: str, kind: str) -> float | int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key}: a number is needed")
    if kind == INT:
        if value != int(value):
            raise ValueError(f"{key}: a whole number is needed")
        return int(value)
    return float(value)


def distributions(parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """{name: Optuna distribution} for study.ask."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out = {}
    for p in parameters:
        if p["kind"] == FLOAT:
            out[p["name"]] = FloatDistribution(p["low"], p["high"], log=p["log"])
        elif p["kind"] == INT:
            out[p["name"]] = IntDistribution(p["low"], p["high"], log=p["log"], step=1 if p["log"] else p["step"])
        else:
            out[p["name"]] = CategoricalDistribution(p["choices"])
    return out


def grid(parameters: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """{name: the values a grid sweep tries}."""
    out: dict[str, list[Any]] = {}
    for p in parameters:
        if p["kind"] == CHOICE:
            out[p["name"]] = list(p["choices"])
        elif p["kind"] == INT:
            out[p["name"]] = list(range(p["low"], p["high"] + 1, p["step"]))
        else:
            n, low, high = p.get("points", DEFAULT_GRID_POINTS), p["low"], p["high"]
            if p["log"]:
                inner = [math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (n - 1)) for i in range(1, n - 1)]
            else:
                inner = [low + (high - low) * i / (n - 1) for i in range(1, n - 1)]
            out[p["name"]] = [low, *inner, high]  # the ends exactly: computed ones fall just outside the range
    return out


def overrides(values: dict[str, Any]) -> dict[str, Any]:
    """A trial's {"optim.lr": 0.001} as the spec sections it changes: {"optim": {"lr": 0.001}}."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        *sections, key = name.split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
        target[key] = value
    return out


def describe(p: dict[str, Any]) -> str:
    """One parameter in words: 'optim.lr 1e-05 to 0.01, log'."""
    if p["kind"] == CHOICE:
        return f"{p['name']} in {', '.join(map(str, p['choices']))}"
    scale = "log" if p["log"] else (f"step {p['step']}" if p["kind"] == INT else "linear")
    return f"{p['name']} {p['low']:g} to {p['high']:g}, {scale}"
