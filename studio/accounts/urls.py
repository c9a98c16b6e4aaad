from django.contrib.auth import views as auth_views
from django.urls import path

from studio.accounts import pages

urlpatterns = [
    path("", pages.home, name="home"),
    path("login/", pages.SignIn.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("teams/", pages.teams, name="teams"),
]
