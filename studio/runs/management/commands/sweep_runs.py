import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from studio.runs.lifecycle import sweep_lost_runs


class Command(BaseCommand):
    help = "Mark running runs whose worker stopped sending heartbeats as failed (once, or --every N seconds)."

    def add_arguments(self, parser):
        parser.add_argument("--every", type=float, default=0, help="repeat every N seconds (0: once)")

    def handle(self, *args, every: float = 0, **options):
        while True:
            failed = sweep_lost_runs()
            if failed:
                self.stdout.write(f"marked failed (worker lost): {failed}")
            close_old_connections()
            if not every:
                return
            time.sleep(every)
