from django.urls import path

from studio.experiments import pages

urlpatterns = [
    path("experiments/", pages.experiments, name="experiments"),
    path("experiments/new/", pages.experiment_edit, name="experiment-new"),
    path("experiments/<int:pk>/", pages.experiment_detail, name="experiment"),
    path("experiments/<int:pk>/edit/", pages.experiment_edit, name="experiment-edit"),
]
