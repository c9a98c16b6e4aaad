from __future__ import annotations

from pathlib import Path

from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.datasets import storage
from studio.datasets.files import PREVIEW_ROWS, DatasetFileError, inspect_dataset
from studio.datasets.models import FORMATS, Dataset
from studio.lib.team_api import TeamField, TeamScopedViewSet

PREVIEW_MAX = 200
MAPPING_FIELDS = ["split", "prompt_field", "messages_field", "answer_field", "extra_fields"]


class DatasetSerializer(serializers.ModelSerializer):
    team = TeamField()
    file = serializers.FileField(write_only=True, required=False, help_text="Upload (JSONL, CSV or Parquet).")
    path = serializers.CharField(required=False, help_text="Server-side file or Hugging Face dataset folder.")
    format = serializers.ChoiceField(choices=[("auto", "auto"), *FORMATS], default="auto")
    is_valid = serializers.BooleanField(read_only=True)

    class Meta:
        model = Dataset
        fields = ["id", "team", "name", "description", "source", "path", "file", "format", *MAPPING_FIELDS,
                  "columns", "row_count", "size_bytes", "errors", "error_count", "is_valid", "created", "updated"]  # fmt: skip
        read_only_fields = ["source", "columns", "row_count", "size_bytes", "errors", "error_count"]

    def validate(self, attrs):
        if self.instance is None:
            # Refuse before the upload is written anywhere: a viewer's or an outsider's file never lands.
            perms.require(self.context["request"].user, attrs["team"], perms.EDIT)
            attrs = self._place_file(attrs)
        # A PUT names the team (a required field): naming the same team again is no change.
        elif "path" in attrs or "file" in attrs or attrs.get("team", self.instance.team) != self.instance.team:
            raise serializers.ValidationError({"path": "a dataset's file and team cannot change; create a new one"})
        elif attrs.get("format") == "auto":  # a PUT's default: keep the format guessed from the same file
            del attrs["format"]
        if not (attrs.get("prompt_field", getattr(self.instance, "prompt_field", "prompt"))
                or attrs.get("messages_field", getattr(self.instance, "messages_field", ""))):  # fmt: skip
            raise serializers.ValidationError({"prompt_field": "set prompt_field or messages_field"})
        return attrs

    def validate_split(self, value):
        if not storage.is_split_name(value):
            raise serializers.ValidationError("a split is a name (like 'train'), not a path")
        return value

    def _place_file(self, attrs):
        upload, raw_path = attrs.pop("file", None), attrs.get("path")
        if bool(upload) == bool(raw_path):
            raise serializers.ValidationError({"file": "give either a file to upload or a server-side path"})
        path = None
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
            raise serializers.ValidationError({"path": str(exc)}) from None
        attrs["path"] = str(path)
        return attrs

    def save(self, **kwargs):
        dataset = Dataset(**{**self.validated_data, **kwargs}) if self.instance is None else self.instance
        for key, value in self.validated_data.items():
            setattr(dataset, key, value)
        try:
            storage.refresh(dataset)
        except DatasetFileError as exc:
            if dataset.pk is None and dataset.source == "upload":
                storage.discard_upload(dataset.path)  # a file that cannot be read is not kept
            raise serializers.ValidationError({"path": str(exc)}) from None
        dataset.save()
        self.instance = dataset
        return dataset


class DatasetViewSet(TeamScopedViewSet):
    """Datasets: upload a file (multipart `file`) or register a server-side `path`; map fields; preview."""

    model = Dataset
    serializer_class = DatasetSerializer
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def perform_destroy(self, instance: Dataset) -> None:
        path, uploaded = instance.path, instance.source == "upload"
        instance.delete()  # ProtectedError (in use) leaves the file too
        if uploaded:
            storage.discard_upload(path)

    @action(detail=True, methods=["get"])
    def preview(self, request, pk=None):
        """First rows (streamed, `?limit=` from 1 to 200), columns, row count and mapping errors."""
        dataset = self.get_object()
        try:
            limit = int(request.query_params.get("limit") or PREVIEW_ROWS)
        except ValueError:
            return Response({"limit": f"must be a whole number from 1 to {PREVIEW_MAX}"}, status=400)
        limit = max(1, min(limit, PREVIEW_MAX))
        try:
            report = inspect_dataset(Path(dataset.path), dataset.format, split=dataset.split, preview_rows=limit)
        except DatasetFileError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response({"columns": report.columns, "rows": report.preview, "row_count": report.row_count,
                         "errors": dataset.errors, "error_count": dataset.error_count})  # fmt: skip
