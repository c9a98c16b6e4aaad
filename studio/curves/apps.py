from django.apps import AppConfig


class CurvesConfig(AppConfig):
    name = "studio.curves"
    verbose_name = "Curves (downsampled metric series, plotly.js)"
