"""The sweep pages: "New sweep" from an experiment (a form), a sweep's page (its trials, the objective over
trials, settings against the objective, the importances) and its actions (stop, a trial made an experiment)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from studio.accounts import permissions as perms
from studio.experiments.models import Experiment
from studio.lib.page_forms import flat_errors, serializer_context
from studio.sweeps import search, services, space
from studio.sweeps.api import SweepSerializer
from studio.sweeps.models import DEFAULT_OBJECTIVE, PRUNERS, SAMPLERS, Sweep
from studio.sweeps.space import SpaceError

PARAMETER_ROWS = 4  # settings the form offers to vary at once (the API takes up to space.MAX_PARAMETERS)
OPTIONS = ("name", "objective", "direction", "objective_at", "sampler", "pruner", "pruner_startup_trials", "seed",
           "max_trials", "max_concurrent", "max_gpu_hours")  # fmt: skip
OBJECTIVES = ("val/reward/mean", "val/pass@1", "reward/mean")


def read_parameters(post) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The form's parameter rows as the API's parameters, and what could not be read, by row."""
    fields = space.sweepable_fields()
    out, errors = [], {}
    for i in range(PARAMETER_ROWS):
        name = post.get(f"p{i}-name", "").strip()
        if not name:
            continue
        f = fields.get(name)
        if f is None:
            errors[f"parameters[{len(out)}].name"] = f"{name!r} is not a setting a sweep can vary"
            continue
        kind = space.kind_of(f)
        row: dict[str, Any] = {"name": name, "kind": kind}
        if kind == space.CHOICE:
            allowed = {str(c).lower(): c for c in space.choices_of(f)}
            picked = [c.strip() for c in post.get(f"p{i}-choices", "").split(",") if c.strip()]
            row["choices"] = [allowed.get(c.lower(), c) for c in picked]
        else:
            for key in ("low", "high"):
                row[key] = _number(post.get(f"p{i}-{key}", ""))
            row["log"] = post.get(f"p{i}-scale") == "log"
            if kind == space.INT and post.get(f"p{i}-step", "").strip():
                row["step"] = _number(post.get(f"p{i}-step"))
            if kind == space.FLOAT and post.get(f"p{i}-points", "").strip():
                row["points"] = _number(post.get(f"p{i}-points"))
        out.append(row)
    return out, errors


def _number(text: str) -> Any:
    """A number typed in the form (int when whole), or the text itself, which the checks refuse by name."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


@login_required
def sweep_new(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.all(), pk, perms.EDIT)
    errors: dict[str, str] = {}
    post = request.POST if request.method == "POST" else None
    if post is not None:
        parameters, errors = read_parameters(post)
        data = {k: post.get(k) for k in OPTIONS if post.get(k, "") != ""}
        serializer = SweepSerializer(data={**data, "experiment": experiment.pk, "parameters": parameters},
                                     context=serializer_context(request))  # fmt: skip
        if not errors and not serializer.is_valid():
            errors = flat_errors(serializer.errors)
        if not errors:
            fields = {k: v for k, v in serializer.validated_data.items() if k != "experiment"}
            try:
                sweep = services.create(experiment, request.user, fields)
            except (services.SweepRefused, SpaceError) as exc:
                errors = exc.errors
            else:
                return redirect("sweep", sweep.pk)
    fields = space.sweepable_fields()
    current = experiment.spec_config()
    settings = [{"name": name, "kind": space.kind_of(f), "choices": [str(c) for c in space.choices_of(f)],
                 "minimum": f.minimum, "maximum": f.maximum, "help": f.help,
                 "value": _value_at(current, name)} for name, f in fields.items()]  # fmt: skip
    rows = [{"i": i, **{k: (post or {}).get(f"p{i}-{k}", "") for k in ("name", "low", "high", "scale", "step",
                                                                          "points", "choices")}}
            for i in range(PARAMETER_ROWS)]  # fmt: skip
    if post is None:  # a first sweep of the usual two: the learning rate (log) and the group size
        rows[0].update(name="optim.lr", low="1e-6", high="1e-3", scale="log")
        rows[1].update(name="algorithm.group_size", low="2", high="8", step="2")
    values = {k: (post or {}).get(k, "") for k in OPTIONS}
    return render(request, "sweeps/new.html", {
        "experiment": experiment, "settings": settings, "rows": rows, "values": values, "errors": errors,
        "samplers": SAMPLERS, "pruners": PRUNERS, "objectives": OBJECTIVES, "default_objective": DEFAULT_OBJECTIVE,
    })  # fmt: skip


def _value_at(config: dict[str, Any], name: str) -> Any:
    node: Any = config
    for part in name.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


@login_required
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = perms.get_for(request.user, Sweep.objects.select_related("experiment", "team"), pk)
    trials = list(sweep.trials.select_related("run"))
    summary = services.summary(sweep)
    importances = search.importances(sweep)
    names = [p["name"] for p in sweep.parameters]
    plot = {
        "objective": sweep.objective, "direction": sweep.direction, "parameters": sweep.parameters,
        "trials": [{"number": t.number, "values": t.values, "objective": t.objective, "state": t.state,
                    "run": t.run_id} for t in trials],
        "importances": importances,
    }  # fmt: skip
    rows = [{"trial": t, "values": [_shown(t.values.get(n)) for n in names], "run": t.run,
             "duration": _duration(t.run), "gpu_hours": t.run.gpu_seconds / 3600 if t.run else None}
            for t in trials]  # fmt: skip
    run_ids = ",".join(str(t.run_id) for t in trials if t.run_id)
    return render(request, "sweeps/detail.html", {
        "sweep": sweep, "names": names, "rows": rows, "summary": summary, "plot": plot,
        "ranges": [space.describe(p) for p in sweep.parameters], "rule": search.rule(sweep), "run_ids": run_ids,
        "can_edit": perms.has_role(request.user, sweep.team_id, perms.EDIT),
    })  # fmt: skip


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _duration(run) -> float | None:
    if run is None or run.started is None or run.finished is None:
        return None
    return (run.finished - run.started).total_seconds()


@login_required
@require_POST
def sweep_stop(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = perms.get_for(request.user, Sweep.objects.all(), pk, perms.EDIT)
    services.stop(sweep)
    messages.info(request, "Sweep stopped: no more trials; the running ones stop, each keeping its last step.")
    return redirect("sweep", pk)


@login_required
@require_POST
def trial_experiment(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    sweep = perms.get_for(request.user, Sweep.objects.select_related("experiment"), pk, perms.EDIT)
    trial = sweep.trials.filter(number=number).first()
    if trial is None:
        messages.error(request, f"Sweep {sweep.name!r} has no trial {number}.")
        return redirect("sweep", pk)
    try:
        experiment = services.trial_experiment(trial, request.user, serializer_context(request))
    except services.SweepRefused as exc:
        messages.error(request, f"Cannot make an experiment of trial {number}: {exc}")
        return redirect("sweep", pk)
    return redirect("experiment", experiment.pk)
