"""The datasets list (with the upload form) and a dataset's page (preview, errors, field mapping)."""

from __future__ import annotations

from itertools import islice

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from studio.accounts import permissions as perms
from studio.datasets import storage
from studio.datasets.api import MAPPING_FIELDS, DatasetSerializer
from studio.datasets.files import DatasetFileError, iter_rows
from studio.datasets.models import REFUSED, Dataset
from studio.lib.page_forms import flat_errors, serializer_context


def _extra_fields(post) -> list[str]:
    return [f.strip() for f in post.get("extra_fields", "").split(",") if f.strip()]


@login_required
def datasets(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    if request.method == "POST":
        data = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken" and v != ""}
        data["extra_fields"] = _extra_fields(request.POST)
        if "file" in request.FILES:
            data["file"] = request.FILES["file"]
        serializer = DatasetSerializer(data=data, context=serializer_context(request))
        if serializer.is_valid():  # checks the role before an upload is written (404/403 otherwise)
            dataset = serializer.save(created_by=request.user)
            return redirect("dataset", dataset.pk)
        errors = flat_errors(serializer.errors)
    rows = perms.visible(Dataset.objects.all(), request.user).distinct().select_related("team")
    teams = perms.editable_teams(request.user).distinct()
    return render(request, "datasets/list.html", {"datasets": rows, "teams": teams, "errors": errors,
                                                  "post": request.POST,
                                                  "max_upload_mb": settings.MAX_UPLOAD_MB})  # fmt: skip


@login_required
def dataset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    dataset = perms.get_for(request.user, Dataset.objects.all(), pk)
    errors: dict[str, str] = {}
    if request.method == "POST":
        perms.check(request.user, dataset, perms.EDIT)
        data = {k: request.POST.get(k, "") for k in MAPPING_FIELDS if k != "extra_fields"}
        data["extra_fields"] = _extra_fields(request.POST)
        serializer = DatasetSerializer(dataset, data=data, partial=True, context=serializer_context(request))
        if serializer.is_valid():
            serializer.save()
            return redirect("dataset", dataset.pk)
        errors = flat_errors(serializer.errors)
    preview: list = []
    if dataset.status != REFUSED:  # a refused upload's file is gone; the page says why instead
        try:
            preview = [
                row for _, row in islice(iter_rows(storage.readable(dataset), dataset.format, dataset.split), 20)
            ]
        except DatasetFileError as exc:
            errors = {**errors, "path": str(exc)}
    can_edit = perms.has_role(request.user, dataset.team_id, perms.EDIT)
    return render(request, "datasets/detail.html", {"dataset": dataset, "preview": preview, "errors": errors,
                                                    "can_edit": can_edit})  # fmt: skip
