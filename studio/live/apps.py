from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "studio.live"
    label = "live"
