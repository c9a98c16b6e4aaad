from django.urls import path

from studio.environments import pages

urlpatterns = [
    path("environments/", pages.environments, name="environments"),
    path("environments/new/", pages.environment_edit, name="environment-new"),
    path("environments/<int:pk>/", pages.environment_edit, name="environment"),
]
