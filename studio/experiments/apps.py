from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "studio.experiments"
    label = "experiments"
