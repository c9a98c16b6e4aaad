from django.apps import AppConfig


class EnvironmentsConfig(AppConfig):
    name = "studio.environments"
    label = "environments"
