"""A stand-in worker for tests/studio/runs/live/test_broker_outage.py, run as a separate process
against that test's own studio (its SQLite file and its Redis), so that it publishes through the
real channel layer as a worker does.

Creates a user with an API token and prints {"token": ...} as one JSON line, then reads commands
from stdin, one a line, and answers each with one line:

- `run`: a new running run of the user's team; prints its id.
- `record RUN N`: N log events appended to the run as a worker appends them
  (`studio.runs.events.record`: stored, then published to the channel layer, best effort: with
  Redis away the publish fails and is logged); prints the run's last seq.
"""

from __future__ import annotations

import json
import sys

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from studio.accounts.models import OWNER, Team  # noqa: E402
from studio.runs import events  # noqa: E402
from studio.runs.models import Run  # noqa: E402


def main() -> None:
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    team = Team.objects.create(name="Reasoning")
    team.add_member(user, OWNER)
    print(json.dumps({"token": Token.objects.create(user=user).key}), flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "run":
            run = Run.objects.create(team=team, name="outage", spec={}, state="running", created_by=user)
            print(run.pk, flush=True)
        elif command == "record":
            run_id, count = int(args[0]), int(args[1])
            first = Run.objects.get(pk=run_id).last_seq + 1
            events.record(run_id, [("log", None, {"line": f"line {first + i}"}) for i in range(count)])
            print(Run.objects.get(pk=run_id).last_seq, flush=True)


if __name__ == "__main__":
    main()
