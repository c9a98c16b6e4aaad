"""POST /api/token/: a username and password for the user's API token, under the sign-in lockout
(a password change revokes the token: studio.accounts.passwords)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from studio.accounts import lockout
from studio.lib.api_schema import ErrorSerializer

USERNAME_MAX = get_user_model()._meta.get_field("username").max_length  # 150


class BoundedAuthTokenSerializer(AuthTokenSerializer):
    """DRF's, with a username no longer than a user's can be: a longer one is refused before sign-in is
    tried (django-axes records the username of each failure in a 255-character column, which PostgreSQL
    refuses to overflow: a 500 on the one endpoint that needs no login)."""

    username = serializers.CharField(label="Username", write_only=True, max_length=USERNAME_MAX)


class ObtainToken(ObtainAuthToken):
    """DRF's token view, reading bodies with the studio's parsers (the JSON limits) and answering a
    locked-out sign-in 429 with the reason instead of "Unable to log in"."""

    parser_classes = api_settings.DEFAULT_PARSER_CLASSES
    serializer_class = BoundedAuthTokenSerializer
    error_responses = {"post": {"429": OpenApiResponse(ErrorSerializer, description=lockout.lockout_message())}}

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            # django-axes marks the request it was handed: DRF's, not Django's that its middleware reads.
            if getattr(request, "axes_locked_out", False):
                return lockout.api_lockout_response()
            raise ValidationError(serializer.errors)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})


obtain_token = ObtainToken.as_view()
