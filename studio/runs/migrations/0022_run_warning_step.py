from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0021_run_tags"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="warning_step",
            field=models.IntegerField(
                blank=True, help_text="The step of the warnings shown; empty: before the first step, or none.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="warning",
            field=models.TextField(
                blank=True, help_text="The warnings of the latest step that had any, one per line (e.g. a criterion "
                "failing on most rollouts; groups without a reward difference).",
            ),
        ),
    ]
