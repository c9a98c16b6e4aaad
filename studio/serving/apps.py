from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "studio.serving"
    label = "serving"
    verbose_name = "Model serving"
