from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "studio.live"
    label = "live"

    def ready(self) -> None:
        from studio.live.groups import connect_signals

        connect_signals()
