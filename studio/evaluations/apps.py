from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "studio.evaluations"
    label = "evaluations"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from studio.evaluations.training import checkpoint_saved
        from studio.runs.models import Checkpoint

        # A training run's checkpoint may be due for its experiment's suite (studio.evaluations.training).
        post_save.connect(checkpoint_saved, sender=Checkpoint, dispatch_uid="evaluations-training-suite")
