"""The sweeps' pages and their API resource (/api/sweeps/), mounted by studio/urls.py."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from studio.sweeps import pages
from studio.sweeps.api import SweepViewSet

router = SimpleRouter()
router.register("sweeps", SweepViewSet, basename="sweep")

urlpatterns = [
    path("api/", include(router.urls)),
    path("experiments/<int:pk>/sweeps/new/", pages.sweep_new, name="sweep-new"),
    path("sweeps/<int:pk>/", pages.sweep_detail, name="sweep"),
    path("sweeps/<int:pk>/trials/<int:number>/experiment/", pages.trial_experiment, name="sweep-trial-experiment"),
    path("sweeps/<int:pk>/stop/", pages.sweep_stop, name="sweep-stop"),
]
