from django.urls import path

from studio.fleet.api import WorkerNodeList
from studio.fleet.pages import fleet_page

urlpatterns = [
    path("fleet/", fleet_page, name="fleet"),
    path("api/fleet/", WorkerNodeList.as_view(), name="api-fleet"),
]
