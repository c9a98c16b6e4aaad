"""Who may see the fleet: alice (owner of team A) and bob (a viewer in team A) may;
charlie belongs to no team and may not. Workers are shared by every team."""

import pytest
from rest_framework.test import APIClient

from studio.accounts.models import OWNER, VIEWER, Team


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
def charlie(db, django_user_model):
    return django_user_model.objects.create_user("charlie", password="pw-charlie-123")


@pytest.fixture
def api():
    return APIClient()
