from django.urls import include, path

urlpatterns = [
    path("", include("studio.front_urls")),
    path("api/", include("studio.api.urls")),
    # Workers and GPUs (studio.fleet): /fleet/ and /api/fleet/.
    path("", include("studio.fleet.urls")),
    path("api/", include("studio.fleet.api_urls")),
    # Run page engineer: curves API + plotly.js (studio.curves), notes/share/compare and pages (studio.sharing).
    path("", include("studio.curves.urls")),
    path("", include("studio.sharing.urls")),
]
