from django.urls import path

from studio.runs import pages, usage_views
from studio.runs.metrics import RunMetricsView
from studio.runs.plotly import plotly_js

urlpatterns = [
    path("runs/", pages.runs, name="runs"),
    path("runs/<int:run_id>/", pages.run_page, name="run-detail"),
    path("runs/<int:run_id>/prompts/", pages.run_prompts_page, name="run-prompts"),
    path("runs/<int:run_id>/tags/", pages.run_tags, name="run-tags"),
    path("api/runs/<int:run_id>/metrics/", RunMetricsView.as_view(), name="run-metrics"),
    path("teams/<int:team_id>/usage/", usage_views.team_usage_page, name="team-usage"),
    path("api/teams/<int:team_id>/usage/", usage_views.TeamUsageView.as_view(), name="api-team-usage"),
    path(
        "api/experiments/<int:experiment_id>/estimate/",
        usage_views.ExperimentEstimateView.as_view(),
        name="api-experiment-estimate",
    ),
    path("static-vendor/plotly.min.js", plotly_js, name="plotly-js"),
]
