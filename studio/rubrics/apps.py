from django.apps import AppConfig


class RubricsConfig(AppConfig):
    name = "studio.rubrics"
    label = "rubrics"
