from django.urls import path

from studio.fleet.api import TeamQuotaList, WorkerNodeList
from studio.fleet.pages import fleet_page
from studio.fleet.served import stop_server

urlpatterns = [
    path("fleet/", fleet_page, name="fleet"),
    path("fleet/servers/<int:server_id>/stop", stop_server, name="fleet-stop-server"),
    path("api/fleet/", WorkerNodeList.as_view(), name="api-fleet"),
    path("api/fleet/quotas/", TeamQuotaList.as_view(), name="api-fleet-quotas"),
]
