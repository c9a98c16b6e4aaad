from django.urls import include, path

urlpatterns = [
    path("", include("studio.front.urls")),
    path("api/", include("studio.api.urls")),
    # The run page and share links, the curves API and the fleet page mount at the root.
    path("", include("studio.sharing.urls")),
    path("", include("studio.curves.urls")),
    path("", include("studio.fleet.urls")),
]
