from __future__ import annotations

import copy

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.datasets import checks, places, storage
from studio.datasets.files import PREVIEW_ROWS, DatasetFileError, inspect_dataset
from studio.datasets.models import FORMATS, REFUSED, Dataset
from studio.datasets.uploads import RefusedUpload
from studio.lib.fields import StudioModelSerializer
from studio.lib.parsers import BoundedJSONParser
from studio.lib.team_api import TeamField, TeamScopedViewSet, delete_unused

PREVIEW_MAX = 200
MAPPING_FIELDS = ["split", "prompt_field", "messages_field", "answer_field", "extra_fields"]
CHECKED_FIELDS = {"format", *MAPPING_FIELDS}  # a change to these reads the file again


class DatasetSerializer(StudioModelSerializer):
    team = TeamField()
    file = serializers.FileField(
        write_only=True, required=False, help_text="Upload (JSONL, CSV or Parquet), up to STUDIO_MAX_UPLOAD_MB."
    )
    path = serializers.CharField(required=False, help_text="Server-side file or Hugging Face dataset folder.")
    format = serializers.ChoiceField(choices=[("auto", "auto"), *FORMATS], default="auto")
    is_valid = serializers.BooleanField(read_only=True)
    valid_rows = serializers.IntegerField(
        read_only=True, help_text="Rows a run can use: row_count less the invalid ones (error_count, one per row)."
    )
    full_check_needed = False  # set by the request's check: the file is longer than it reads

    class Meta:
        model = Dataset
        fields = ["id", "team", "name", "description", "source", "path", "file", "format", *MAPPING_FIELDS,
                  "status", "status_detail", "columns", "row_count", "size_bytes", "errors", "error_count",
                  "warnings", "longest_prompt_chars", "is_valid", "valid_rows", "created", "updated"]  # fmt: skip
        read_only_fields = ["source", "status", "status_detail", "columns", "row_count", "size_bytes", "errors",
                            "error_count", "warnings", "longest_prompt_chars"]  # fmt: skip

    def validate(self, attrs):
        if not (attrs.get("prompt_field", getattr(self.instance, "prompt_field", "prompt"))
                or attrs.get("messages_field", getattr(self.instance, "messages_field", ""))):  # fmt: skip
            raise serializers.ValidationError({"prompt_field": "set prompt_field or messages_field"})
        if self.instance is None:
            # Refuse before the upload is written anywhere: a viewer's or an outsider's file never lands.
            perms.require(self.context["request"].user, attrs["team"], perms.EDIT)
            attrs = self._place_file(attrs)
        # A PUT names the team (a required field): naming the same team again is no change.
        elif "path" in attrs or "file" in attrs or attrs.get("team", self.instance.team) != self.instance.team:
            raise serializers.ValidationError({"path": "a dataset's file and team cannot change; create a new one"})
        elif attrs.get("format") == "auto":  # a PUT's default: keep the format guessed from the same file
            del attrs["format"]
        if self.instance is None or any(
            value != getattr(self.instance, key) for key, value in attrs.items() if key in CHECKED_FIELDS
        ):
            attrs.update(self._check(attrs))
        return attrs

    def validate_extra_fields(self, value):
        if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
            raise serializers.ValidationError("must be a list of column names")
        return value

    def validate_split(self, value):
        if not places.is_split_name(value):
            raise serializers.ValidationError("a split is a name (like 'train'), not a path")
        return value

    def _place_file(self, attrs):
        upload, raw_path = attrs.pop("file", None), attrs.get("path")
        if bool(upload) == bool(raw_path):
            raise serializers.ValidationError({"file": "give either a file to upload or a server-side path"})
        if isinstance(upload, RefusedUpload):  # over the size limit: none of it was kept
            raise serializers.ValidationError({"file": f"{upload.name}: {upload.reason}"})
        field, path = "file" if upload else "path", None
        try:
            if upload:
                path = storage.save_upload(upload)
                attrs["source"] = "upload"
            else:
                path = storage.server_path(raw_path)
                attrs["source"] = "hf_folder" if path.is_dir() else "server_file"
            attrs["format"] = storage.guess_format(path, attrs.get("format"))
        except DatasetFileError as exc:
            if upload and path is not None:
                storage.discard_upload(path)  # e.g. an extension no reader knows
            raise serializers.ValidationError({field: str(exc)}) from None
        attrs["path"] = str(path)
        return attrs

    def _check(self, attrs):
        """The request's bounded check of the file as `attrs` would read it (studio.datasets.checks),
        as attrs; a file that cannot be read is refused here, and an upload of it deleted."""
        dataset = Dataset(**attrs) if self.instance is None else copy.copy(self.instance)
        for key, value in attrs.items():
            setattr(dataset, key, value)
        try:
            self.full_check_needed = not checks.check_in_request(dataset)
        except DatasetFileError as exc:
            uploaded = dataset.source == "upload"
            if self.instance is None and uploaded:
                storage.discard_upload(dataset.path)  # a file that cannot be read is not kept
            raise serializers.ValidationError({"file" if uploaded else "path": str(exc)}) from None
        return {name: getattr(dataset, name) for name in checks.FINDINGS}

    def save(self, **kwargs):
        """Create or update; a long file's rows past the request's check are read by a worker."""
        if self.instance is None:
            self.instance = Dataset.objects.create(**self.validated_data, **kwargs)
        else:
            for key, value in self.validated_data.items():
                setattr(self.instance, key, value)
            # only what was sent (and checked): a concurrent check's writes to the other fields stay
            self.instance.save(update_fields=[*self.validated_data, "updated"])
        if self.full_check_needed:
            checks.start_full_check(self.instance)
        return self.instance


PREVIEW = inline_serializer("DatasetPreview", {
    "columns": serializers.ListField(child=serializers.CharField()),
    "rows": serializers.ListField(child=serializers.DictField(), help_text="The first rows, as read."),
    "row_count": serializers.IntegerField(allow_null=True, help_text="Rows found by the last check."),
    "status": serializers.CharField(),
    "errors": serializers.ListField(child=serializers.DictField(), help_text="[{row, field, message}], first ones only."),
    "error_count": serializers.IntegerField(),
})  # fmt: skip


class DatasetViewSet(TeamScopedViewSet):
    """Datasets: upload a file (multipart `file`) or register a server-side `path`; map fields; preview."""

    model = Dataset
    serializer_class = DatasetSerializer
    parser_classes = [BoundedJSONParser, MultiPartParser, FormParser]

    def perform_destroy(self, instance: Dataset) -> None:
        path, uploaded = instance.path, instance.source == "upload"
        delete_unused(instance)  # InUse (409) leaves the file too
        if uploaded:
            storage.discard_upload(path)

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description=f"Rows to show, 1 to {PREVIEW_MAX} (default {PREVIEW_ROWS}).")
        ],
        responses=PREVIEW,
    )
    @action(detail=True, methods=["get"])
    def preview(self, request, pk=None):
        """First rows (streamed, `?limit=` from 1 to 200) and their columns, with the last check's row
        count and mapping errors."""
        dataset = self.get_object()
        if dataset.status == REFUSED:
            return Response({"detail": f"the dataset was refused: {dataset.status_detail}"}, status=400)
        try:
            limit = int(request.query_params.get("limit") or PREVIEW_ROWS)
        except ValueError:
            return Response({"limit": f"must be a whole number from 1 to {PREVIEW_MAX}"}, status=400)
        limit = max(1, min(limit, PREVIEW_MAX))
        try:
            report = inspect_dataset(storage.readable(dataset), dataset.format, split=dataset.split, preview_rows=limit,
                                     max_rows=limit)  # fmt: skip
        except DatasetFileError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response({"columns": report.columns, "rows": report.preview, "row_count": dataset.row_count,
                         "status": dataset.status, "errors": dataset.errors,
                         "error_count": dataset.error_count})  # fmt: skip
