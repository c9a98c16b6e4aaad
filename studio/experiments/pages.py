"""The experiments list, the experiment form (presets plus every RunSpec knob) and an
experiment's page (its validated settings, its runs, and launching one)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.environments.models import Environment, EnvironmentVersion
from studio.experiments import forms, layout, paths, services
from studio.experiments.api import ExperimentSerializer
from studio.experiments.models import Experiment
from studio.experiments.paths import validate_for_team
from studio.experiments.specs import SpecError, asynchrony_note
from studio.lib.page_forms import flat_errors, serializer_context
from studio.lib.params import as_id
from studio.rubrics.models import Rubric
from trainers.spec import PRESET_DESCRIPTIONS, apply_preset


@login_required
def experiments(request: HttpRequest) -> HttpResponse:
    rows = perms.visible(Experiment.objects.all(), request.user).distinct().select_related("team", "dataset", "rubric")
    return render(request, "experiments/list.html", {"experiments": rows})


@login_required
def experiment_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.all(), pk, perms.EDIT) if pk else None
    source = None
    if experiment is None and request.GET.get("clone"):
        source = perms.get_for(request.user, Experiment.objects.all(), request.GET["clone"])
    base = experiment or source
    meta = forms.experiment_meta(base, request.POST if request.method == "POST" else None)
    config = base.config if base else {}
    if base is None and request.method != "POST":  # a new form starts from a preset, with its values
        meta["preset"] = layout.DEFAULT_PRESET
        config = apply_preset(config, layout.DEFAULT_PRESET)
    if source is not None and request.method != "POST":  # a clone says what it is a clone of
        meta.update(name=services.clone_name(source), description=services.clone_description(source))
    errors: dict[str, str] = {}
    if request.method == "POST":
        config, errors = forms.read_experiment_config(request.POST)
        if not errors:
            data = {**meta, "config": config}
            serializer = ExperimentSerializer(experiment, data=data, context=serializer_context(request))
            if not serializer.is_valid():
                errors = flat_errors(serializer.errors)
            else:
                try:
                    settled = services.settle(serializer.validated_data, experiment)
                except services.ExperimentRefused as exc:  # shown beside each field, as the API names them
                    errors = exc.errors
                else:
                    perms.require(request.user, serializer.validated_data["team"], perms.EDIT)
                    saved = serializer.save(**settled, **({} if experiment else {"created_by": request.user}))
                    return redirect("experiment", saved.pk)
    sections = forms.experiment_sections(config, {})
    # Each error beside its field (a setting's, or the input above that sets it), the rest at the top.
    placed = layout.place_errors(errors, sections)
    for _, fields in sections:
        for f in fields:
            f.error = placed.beside.get(f.name, "")
    environments = list(perms.visible(Environment.objects.all(), request.user).distinct())
    context = {
        "experiment": experiment, "meta": meta, "sections": sections, "errors": errors, "placed": placed,
        "groups": layout.experiment_groups(sections, meta["preset"]),
        "step_cost": layout.StepCost.of([f for _, fields in sections for f in fields],
                                        chosen_environment(environments, meta)),
        "form_rules": layout.page_rules(sections, environments), "known_models": layout.known_models(request.user),
        "model_note": "" if "model_path" in placed.meta else paths.model_source_note(str(meta["model_path"] or "")),
        "teams": perms.editable_teams(request.user).distinct(),
        "datasets": perms.visible(Dataset.objects.all(), request.user).distinct(),
        "rubrics": perms.visible(Rubric.objects.all(), request.user).distinct(),
        "environments": environments, "presets": PRESET_DESCRIPTIONS,
    }  # fmt: skip
    return render(request, "experiments/edit.html", context)


def chosen_environment(environments: list[Environment], meta: dict) -> dict | None:
    """The config of the environment (and version) the form names, for the step cost; None for none."""
    pk, version = as_id(meta.get("environment")), as_id(meta.get("environment_version"))
    environment = next((e for e in environments if e.pk == pk), None)
    if environment is None:
        return None
    try:
        return environment.config_of(version)
    except EnvironmentVersion.DoesNotExist:  # a version that does not exist: the form says so beside it
        return environment.config


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = perms.get_for(request.user, Experiment.objects.select_related("dataset", "rubric", "environment"), pk)
    can_edit = perms.has_role(request.user, experiment.team_id, perms.EDIT)
    if request.method == "POST":
        perms.check(request.user, experiment, perms.EDIT)
        kind = "eval" if request.POST.get("kind") == "eval" else "train"
        try:
            run = services.launch(experiment, request.user, kind=kind)
        except services.LaunchError as exc:
            messages.error(request, f"Cannot launch: {exc}")
            return redirect("experiment", pk)
        return redirect("run-detail", run.pk)
    try:
        spec, spec_errors = validate_for_team(experiment.spec_config(), experiment.team), []
    except SpecError as exc:
        spec, spec_errors = (
            None,
            layout.labelled_errors(exc.errors, forms.experiment_sections(experiment.spec_config(), {})),
        )
    runs = experiment.runs.order_by("-created")[:50]
    return render(request, "experiments/detail.html", {"experiment": experiment, "spec": spec, "runs": runs,
                  "spec_errors": spec_errors, "can_edit": can_edit,
                  "asynchrony": asynchrony_note(spec)})  # fmt: skip
