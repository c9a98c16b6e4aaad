from django.contrib.auth import views as auth_views
from django.urls import path

from studio.front import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("teams/", views.teams, name="teams"),
    path("datasets/", views.datasets, name="datasets"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset"),
    path("rubrics/", views.rubrics, name="rubrics"),
    path("rubrics/new/", views.rubric_edit, name="rubric-new"),
    path("rubrics/<int:pk>/", views.rubric_edit, name="rubric"),
    path("experiments/", views.experiments, name="experiments"),
    path("experiments/new/", views.experiment_edit, name="experiment-new"),
    path("experiments/<int:pk>/", views.experiment_detail, name="experiment"),
    path("experiments/<int:pk>/edit/", views.experiment_edit, name="experiment-edit"),
    path("runs/", views.runs, name="runs"),
]
