from django.urls import include, path
from rest_framework.routers import SimpleRouter

from studio.evaluations import pages
from studio.evaluations.api import SuiteRunViewSet, SuiteViewSet, TrainingSuiteViewSet

# A router of its own (no root view): the main router's /api/ root stays the one index.
router = SimpleRouter()
router.register("suites", SuiteViewSet, basename="suite")
router.register("suite-runs", SuiteRunViewSet, basename="suite-run")
router.register("training-suites", TrainingSuiteViewSet, basename="training-suite")

urlpatterns = [
    path("api/", include(router.urls)),
    path("suites/", pages.suites, name="suites"),
    path("suites/new/", pages.suite_edit, name="suite-new"),
    path("suites/<int:pk>/", pages.suite_edit, name="suite"),
    path("suites/<int:pk>/launch/", pages.suite_launch, name="suite-launch"),
    path("suite-runs/<int:pk>/", pages.suite_run_page, name="suite-run"),
]
