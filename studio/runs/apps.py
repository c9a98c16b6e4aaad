from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "studio.runs"
    label = "runs"

    def ready(self) -> None:
        from studio.runs.live.groups import connect_signals

        connect_signals()
