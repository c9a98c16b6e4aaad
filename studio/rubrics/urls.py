from django.urls import path

from studio.rubrics import pages

urlpatterns = [
    path("rubrics/", pages.rubrics, name="rubrics"),
    path("rubrics/new/", pages.rubric_edit, name="rubric-new"),
    path("rubrics/<int:pk>/", pages.rubric_edit, name="rubric"),
]
