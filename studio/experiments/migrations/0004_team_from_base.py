"""`team` now comes from studio.lib.models.TeamObject, whose related_name is "%(class)ss".

Django records the pattern as written, so the migration state changes; the reverse name is still
`team.experiments` and the database is untouched (related_name is not a column attribute: no SQL).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("experiments", "0003_experiment_dataset_optional"),
    ]

    operations = [
        migrations.AlterField(
            model_name="experiment",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="%(class)ss", to="accounts.team"
            ),
        ),
    ]
