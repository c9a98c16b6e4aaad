"""Issue 41: per-team limits the operator sets (TeamQuota), and GPU leases that count shares of a GPU
(GpuLease.slot, .shares: a worker with STUDIO_GPU_SHARE=N lets N small runs hold one GPU). Existing leases are
whole GPUs: slot 0 of 1."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('fleet', '0003_gpulease_model_server'),
    ]

    operations = [
        migrations.CreateModel(
            name='TeamQuota',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('max_running_runs', models.PositiveIntegerField(blank=True, help_text='Runs of the team running at once (empty: no limit).', null=True)),
                ('max_gpus', models.FloatField(blank=True, help_text="GPUs its running runs hold at once; a shared GPU's share counts as its part (empty: no limit).", null=True, validators=[django.core.validators.MinValueValidator(0.0)])),
                ('gpu_hours_per_day', models.FloatField(blank=True, help_text='GPU-hours its runs may use per day, from 00:00 UTC (empty: no limit).', null=True, validators=[django.core.validators.MinValueValidator(0.0)])),
                ('gpu_hours_per_month', models.FloatField(blank=True, help_text='GPU-hours its runs may use per calendar month, UTC (empty: no limit).', null=True, validators=[django.core.validators.MinValueValidator(0.0)])),
                ('note', models.CharField(blank=True, help_text='Why, for the team to read (optional).', max_length=200)),
                ('updated', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['team__name'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='gpulease',
            name='one_run_per_gpu',
        ),
        migrations.AddField(
            model_name='gpulease',
            name='shares',
            field=models.PositiveSmallIntegerField(default=1, help_text='How many shares the worker split the GPU into when this was taken (STUDIO_GPU_SHARE).'),
        ),
        migrations.AddField(
            model_name='gpulease',
            name='slot',
            field=models.PositiveSmallIntegerField(default=0, help_text='Which share of the GPU (0 to shares - 1).'),
        ),
        migrations.AddConstraint(
            model_name='gpulease',
            constraint=models.UniqueConstraint(fields=('worker', 'device', 'slot'), name='one_holder_per_gpu_share'),
        ),
        migrations.AddField(
            model_name='teamquota',
            name='team',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='quota', to='accounts.team'),
        ),
    ]
