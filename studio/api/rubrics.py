from __future__ import annotations

from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from studio.api.base import TeamField, TeamScopedViewSet
from studio.rubrics.models import Rubric
from studio.rubrics.scoring import TryError, try_rubric, validate_rubric


class RubricSerializer(serializers.ModelSerializer):
    team = TeamField()

    class Meta:
        model = Rubric
        fields = ["id", "team", "name", "description", "spec", "created", "updated"]

    def validate_spec(self, value):
        try:
            return validate_rubric(value)
        except TryError as exc:
            raise serializers.ValidationError(exc.errors) from None

    def validate_team(self, value):
        if self.instance is not None and value.pk != self.instance.team_id:
            raise serializers.ValidationError("a rubric cannot move to another team")
        return value


class TrySerializer(serializers.Serializer):
    pairs = serializers.ListField(child=serializers.DictField(), help_text="[{prompt, completion, answer?, ...}]")
    spec = serializers.JSONField(required=False, help_text="Score with this (unsaved) rubric instead.")


class RubricViewSet(TeamScopedViewSet):
    """Rubrics: weighted criteria of every kind in trainers.rewards.catalog; `try` scores pairs on a worker."""

    model = Rubric
    serializer_class = RubricSerializer
    read_only_actions = ("try_it",)

    @action(detail=True, methods=["post"], url_path="try", serializer_class=TrySerializer)
    def try_it(self, request, pk=None):
        rubric = self.get_object()  # members may try (it changes nothing)
        data = TrySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            answer = try_rubric(data.validated_data.get("spec") or rubric.spec, data.validated_data["pairs"])
        except TryError as exc:
            return Response(exc.errors, status=exc.status)
        return Response(answer)
