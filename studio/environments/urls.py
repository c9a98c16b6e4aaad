from django.urls import path

from studio.environments import pages

urlpatterns = [
    path("environments/", pages.environments, name="environments"),
    path("environments/new/", pages.environment_edit, name="environment-new"),
    path("environments/<int:pk>/", pages.environment_edit, name="environment"),
    path("environments/tries/<str:task_id>/", pages.try_progress, name="environment-try-progress"),
    path("environments/tries/<str:task_id>/stop", pages.try_stop, name="environment-try-stop"),
]
