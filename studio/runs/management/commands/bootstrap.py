from django.core.management.base import BaseCommand

from studio.bootstrap import bootstrap


class Command(BaseCommand):
    help = "Create a first user, team and demo (dataset, rubric, tiny model, experiment) where none exist."

    def handle(self, *args, **options):
        login = bootstrap()
        if login:
            self.stdout.write(f"first login: {login[0]} / {login[1]} (also in {login[2]})")
        else:
            self.stdout.write("users exist; nothing to create")
