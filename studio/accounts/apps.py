from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "studio.accounts"
    label = "accounts"

    def ready(self) -> None:
        from studio.accounts import passwords

        passwords.connect()
