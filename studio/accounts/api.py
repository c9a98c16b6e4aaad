from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.accounts import services
from studio.accounts.models import ROLES, Membership, Team
from studio.lib.api_schema import FIELD_ERRORS, id_parameter
from studio.lib.params import as_id


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "username", "role"]
        read_only_fields = ["user"]


class TeamSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()
    members = MembershipSerializer(source="memberships", many=True, read_only=True)

    class Meta:
        model = Team
        fields = ["id", "name", "created", "role", "members"]

    def get_role(self, team: Team) -> str | None:
        return perms.role_in(self.context["request"].user, team.pk)


class AddMemberSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=[r for r, _ in ROLES])


class TeamViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Your teams. Anyone may create a team (and owns it); owners manage members."""

    serializer_class = TeamSerializer
    permission_classes = [IsAuthenticated]

    def get_queryset(self):
        return perms.visible_teams(self.request.user).prefetch_related("memberships__user").distinct()

    def perform_create(self, serializer) -> None:
        # TeamActionError: 400 {field: [why]} (studio.lib.errors)
        serializer.instance = services.create_team(serializer.validated_data["name"], self.request.user)

    @extend_schema(request=AddMemberSerializer, responses={201: MembershipSerializer})
    @action(detail=True, methods=["post"], serializer_class=AddMemberSerializer)
    def members(self, request, pk=None):
        team = perms.get_for(request.user, Team.objects.all(), pk, perms.MANAGE)
        data = AddMemberSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.add_member(team, data.validated_data["username"], data.validated_data["role"])
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[id_parameter("user_id", "The member's user id.", OpenApiParameter.PATH)],
        responses={204: None, 400: FIELD_ERRORS},
    )
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<user_id>\d+)")
    def remove_member(self, request, pk=None, user_id=None):
        team = perms.get_for(request.user, Team.objects.all(), pk, perms.MANAGE)
        membership = get_object_or_404(Membership, team=team, user_id=as_id(user_id) or 0)  # past 64 bits: none
        services.remove_member(team, membership)  # the last owner: 400 {"detail": why}
        return Response(status=status.HTTP_204_NO_CONTENT)
