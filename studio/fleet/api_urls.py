"""Included under /api/ by studio.api.urls."""

from django.urls import path

from studio.fleet.views import WorkerNodeList

urlpatterns = [path("fleet/", WorkerNodeList.as_view(), name="api-fleet")]
