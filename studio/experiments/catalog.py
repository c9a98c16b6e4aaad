"""Read-only schema endpoints: the trainer library's presets and the RunSpec schema."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

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
