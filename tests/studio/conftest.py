"""Named users for the pytest-style studio tests (the unittest-style ones use tests/studio/base.py):
alice owns team A, erin is an editor in it, bob is a viewer in it, charlie is in no team.
Members of any role read the team's objects; owners and editors write; everyone else gets
404 as if the object did not exist (the fleet page, shared by all teams, answers 403)."""

import pytest
from rest_framework.test import APIClient

from studio.accounts.models import EDITOR, OWNER, VIEWER, Team


@pytest.fixture
def team(db):
    return Team.objects.create(name="A")


@pytest.fixture
def alice(team, django_user_model):
    user = django_user_model.objects.create_user("alice", password="pw-alice-123")
    team.add_member(user, OWNER)
    return user


@pytest.fixture
def bob(team, django_user_model):
    user = django_user_model.objects.create_user("bob", password="pw-bob-123")
    team.add_member(user, VIEWER)
    return user


@pytest.fixture
def erin(team, django_user_model):
    user = django_user_model.objects.create_user("erin", password="pw-erin-123")
    team.add_member(user, EDITOR)
    return user


@pytest.fixture
def charlie(db, django_user_model):
    return django_user_model.objects.create_user("charlie", password="pw-charlie-123")


@pytest.fixture
def api():
    return APIClient()
