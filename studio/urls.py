from django.urls import include, path

from studio.runs.rollouts_api import RolloutDetailView, RolloutListView

urlpatterns = [
    path("", include("studio.front_urls")),
    path("api/", include("studio.api.urls")),
    # Workers and GPUs (studio.fleet): /fleet/ and /api/fleet/.
    path("", include("studio.fleet.urls")),
    path("api/", include("studio.fleet.api_urls")),
    # Run page engineer: curves API + plotly.js (studio.curves), notes/share/compare and pages (studio.sharing).
    path("", include("studio.curves.urls")),
    path("", include("studio.sharing.urls")),
    # The rollout inspector's list and detail (run-page engineer); studio.api.urls above wins if it has them.
    path("api/runs/<int:run_id>/rollouts/", RolloutListView.as_view(), name="run-rollouts"),
    path("api/runs/<int:run_id>/rollouts/<int:rollout_id>/", RolloutDetailView.as_view(), name="run-rollout"),
]
