from django.urls import path

from studio.curves.vendor import plotly_js
from studio.curves.views import RunMetricsView

urlpatterns = [
    path("api/runs/<int:run_id>/metrics/", RunMetricsView.as_view(), name="run-metrics"),
    path("static-vendor/plotly.min.js", plotly_js, name="plotly-js"),
]
