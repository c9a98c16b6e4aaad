from django.urls import path

from studio.datasets import pages

urlpatterns = [
    path("datasets/", pages.datasets, name="datasets"),
    path("datasets/<int:pk>/", pages.dataset_detail, name="dataset"),
]
