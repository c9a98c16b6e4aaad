"""What a run used (issue 41): device-seconds (GPU or CPU) summed over its processes, the GPU part, tokens
generated and trained, and the per-attempt, per-process detail they are sums of (studio.runs.usage). Runs
from before record nothing: their fields stay 0 and the pages say so."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0019_eval_split"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="device_seconds",
            field=models.FloatField(
                default=0.0,
                help_text="Wall time of its processes on their devices (GPU or CPU), summed over processes.",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="gpu_seconds",
            field=models.FloatField(default=0.0, help_text="The GPU part of device_seconds (0 for a CPU run)."),
        ),
        migrations.AddField(
            model_name="run",
            name="tokens_generated",
            field=models.BigIntegerField(default=0, help_text="Completion tokens its rollouts sampled."),
        ),
        migrations.AddField(
            model_name="run",
            name="tokens_trained",
            field=models.BigIntegerField(default=0, help_text="Completion tokens its updates trained on."),
        ),
        migrations.AddField(
            model_name="run",
            name="usage",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Per attempt and per process (studio.runs.usage.record): {attempts: {n: {processes: [{rank, "
                "device, seconds}], device_seconds, gpu_seconds, tokens_generated, tokens_trained, final}}}.",
            ),
        ),
    ]
