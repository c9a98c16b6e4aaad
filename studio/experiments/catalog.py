"""Read-only schema endpoints: the trainer library's presets, RunSpec schema and criterion kinds."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from trainers.rewards.catalog import CRITERION_KINDS
from trainers.spec import PRESET_DESCRIPTIONS, RunSpec, preset_values


@extend_schema(responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def presets(request):
    """Named bundles of algorithm settings."""
    return Response({name: {"description": PRESET_DESCRIPTIONS.get(name, ""), "algorithm": preset_values(name)}
                     for name in PRESET_DESCRIPTIONS})  # fmt: skip


@extend_schema(responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def spec_schema(request):
    """JSON schema of trainers.spec.RunSpec (what experiments and runs validate against)."""
    return Response(RunSpec.model_json_schema())


@extend_schema(responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def criterion_kinds(request):
    """Each criterion kind with the JSON schema of its parameters."""
    return Response({kind: {"description": (model.__doc__ or "").strip(), "params": model.model_json_schema()}
                     for kind, model in CRITERION_KINDS.items()})  # fmt: skip
