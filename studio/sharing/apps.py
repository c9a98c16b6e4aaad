from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "studio.sharing"
    verbose_name = "Notes, share links and compare"
