from django.conf import settings
from django.urls import include, path

urlpatterns = [
    path("", include("studio.front.urls")),
    path("api/", include("studio.api.urls")),
]
# The run page, sharing and curves (their own issue) mount at the root when their apps are installed.
for app in ("studio.sharing", "studio.curves", "studio.fleet"):
    if app in settings.INSTALLED_APPS:
        urlpatterns.append(path("", include(f"{app}.urls")))
