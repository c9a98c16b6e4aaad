"""Each tracker secret is bound to the server it may be sent to. A secret set before this is bound to
the server of the team's default settings that name it (owners alone set those); W&B keys no default
names, to W&B's own server (what the form offered). Any other stays unbound, and is sent nowhere until
an owner sets it again with its server."""

from django.db import migrations, models

SECRET_FIELDS = {"trackio": "write_token_secret", "wandb": "api_key_secret", "mlflow": "secret"}
URL_FIELDS = {"trackio": "server_url", "wandb": "base_url", "mlflow": "tracking_uri"}
WANDB = "https://api.wandb.ai"


def bind(apps, schema_editor):
    from trainers.access import Refused, endpoint_base

    secrets = apps.get_model("tracking", "TrackerSecret")
    defaults = apps.get_model("tracking", "MirrorDefaults")
    named: dict[tuple[int, str], str] = {}
    for row in defaults.objects.all():
        for tracker, field in SECRET_FIELDS.items():
            section = (row.settings or {}).get(tracker) or {}
            name, url = section.get(field), section.get(URL_FIELDS[tracker]) or (WANDB if tracker == "wandb" else "")
            if name and url:
                named[(row.team_id, name)] = url
    for secret in secrets.objects.filter(endpoint=""):
        url = named.get((secret.team_id, secret.name)) or (WANDB if secret.kind == "wandb" else "")
        try:
            secret.endpoint = endpoint_base(url) if url else ""
        except Refused:
            continue
        secret.save(update_fields=["endpoint"])


class Migration(migrations.Migration):
    dependencies = [("tracking", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="trackersecret",
            name="endpoint",
            field=models.CharField(
                blank=True,
                max_length=600,
                help_text="The server the secret may be sent to; empty: none (set it again).",
            ),
        ),
        migrations.RunPython(bind, migrations.RunPython.noop),
    ]
