from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "studio.evaluations"
    label = "evaluations"
