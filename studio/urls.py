from django.urls import include, path

urlpatterns = [
    path("", include("studio.front_urls")),
    path("api/", include("studio.api.urls")),
]
