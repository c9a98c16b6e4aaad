"""The people of every studio test, defined once (unittest cases, pytest fixtures, socket worlds):

- alice owns "Alice's team": sees and does everything, manages members;
- bob is an editor in it: sees everything, creates, edits, launches and cancels;
- carol is a viewer in it: sees everything, changes nothing (403);
- charlie owns a team of his own and is in none of theirs: everything of Alice's team is 404
  to him, as if it did not exist (the fleet page, shared by all teams, is open to him);
- dana is signed in but in no team at all (the fleet is closed to her).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from studio.accounts.models import EDITOR, OWNER, VIEWER, Team

TEAM = "Alice's team"
OTHER_TEAM = "Charlie's team"
ROLES = {"alice": OWNER, "bob": EDITOR, "carol": VIEWER}
BY_ROLE = {"owner": "alice", "editor": "bob", "viewer": "carol", "outsider": "charlie"}
PASSWORD = "pw-studio-123"


def the_team() -> Team:
    return Team.objects.get_or_create(name=TEAM)[0]


def person(name: str):
    """The user `name`, created with their role: in Alice's team, owning Charlie's, or (dana) in none."""
    user = get_user_model().objects.create_user(name, password=PASSWORD)
    if name in ROLES:
        the_team().add_member(user, ROLES[name])
    elif name == "charlie":
        Team.objects.get_or_create(name=OTHER_TEAM)[0].add_member(user, OWNER)
    return user


def everyone() -> dict[str, object]:
    """alice, bob, carol and charlie, by name."""
    return {name: person(name) for name in (*ROLES, "charlie")}
