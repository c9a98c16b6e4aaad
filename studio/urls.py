"""Every feature mounts its pages and JSON endpoints from its own urls.py; the REST resources
share one router (its root lists them all at /api/)."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from studio.accounts.api import TeamViewSet
from studio.accounts.tokens import obtain_token
from studio.datasets.api import DatasetViewSet
from studio.environments.api import EnvironmentViewSet, environment_kinds, tools_system_prompt
from studio.experiments import catalog
from studio.experiments.api import ExperimentViewSet
from studio.rubrics.api import RubricViewSet, criterion_kinds
from studio.runs.api import RunViewSet

router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("rubrics", RubricViewSet, basename="rubric")
router.register("environments", EnvironmentViewSet, basename="environment")
router.register("experiments", ExperimentViewSet, basename="experiment")
router.register("runs", RunViewSet, basename="run")

api = [
    path("", include(router.urls)),
    path("token/", obtain_token, name="api-token"),
    path("presets/", catalog.presets, name="api-presets"),
    path("spec-schema/", catalog.spec_schema, name="api-spec-schema"),
    path("criterion-kinds/", criterion_kinds, name="api-criterion-kinds"),
    path("environment-kinds/", environment_kinds, name="api-environment-kinds"),
    path("environment-kinds/tools/system-prompt/", tools_system_prompt, name="api-tools-system-prompt"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]

urlpatterns = [
    path("api/", include(api)),
    path("admin/", admin.site.urls),  # the operator's: team limits (studio.fleet.admin), the fleet's rows
    path("", include("studio.accounts.urls")),
    path("", include("studio.datasets.urls")),
    path("", include("studio.rubrics.urls")),
    path("", include("studio.environments.urls")),
    path("", include("studio.experiments.urls")),
    path("", include("studio.runs.urls")),
    path("", include("studio.sharing.urls")),
    path("", include("studio.fleet.urls")),
    path("", include("studio.tracking.urls")),
    path("", include("studio.ingest.urls")),
    path("", include("studio.evaluations.urls")),
    path("", include("studio.serving.urls")),
    path("", include("studio.sweeps.urls")),
]

# Errors under /api/ (a path no route matches, a failure DRF does not handle) are JSON; pages keep HTML.
handler400 = "studio.lib.error_views.bad_request"
handler403 = "studio.lib.error_views.permission_denied"
handler404 = "studio.lib.error_views.page_not_found"
handler500 = "studio.lib.error_views.server_error"
