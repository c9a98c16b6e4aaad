"""Mounted at the site root by studio.urls: the page and its JSON twin."""

from django.urls import path

from studio.fleet.views import WorkerNodeList, fleet_page

urlpatterns = [
    path("fleet/", fleet_page, name="fleet"),
    path("api/fleet/", WorkerNodeList.as_view(), name="api-fleet"),
]
