from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "studio.fleet"
    label = "fleet"
    verbose_name = "Workers and GPUs"
