from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "studio.sweeps"
    label = "sweeps"

    def ready(self) -> None:
        # The driver hears a run's validation points and its end from studio.runs (which never imports us).
        from studio.sweeps.hooks import connect

        connect()
