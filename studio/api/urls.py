from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from studio.api import catalog
from studio.api.datasets import DatasetViewSet
from studio.api.experiments import ExperimentViewSet
from studio.api.rubrics import RubricViewSet
from studio.api.runs import RunViewSet
from studio.api.teams import TeamViewSet

router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("rubrics", RubricViewSet, basename="rubric")
router.register("experiments", ExperimentViewSet, basename="experiment")
router.register("runs", RunViewSet, basename="run")

urlpatterns = [
    path("", include(router.urls)),
    path("token/", obtain_auth_token, name="api-token"),
    path("presets/", catalog.presets, name="api-presets"),
    path("spec-schema/", catalog.spec_schema, name="api-spec-schema"),
    path("criterion-kinds/", catalog.criterion_kinds, name="api-criterion-kinds"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
