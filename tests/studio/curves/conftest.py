"""Named users for the run page's tests (curves here, notes/share/compare in ../sharing):
alice owns team A, erin is an editor in it, bob is a viewer in it, charlie is in no team.
Members of any role read a run; owners and editors write notes and share links;
everyone else gets 404 as if the run did not exist."""

import pytest
from rest_framework.test import APIClient

from studio.accounts.models import EDITOR, OWNER, VIEWER, Team
from studio.runs.models import MetricPoint, Run


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
def run(team, alice):
    return Run.objects.create(team=team, name="grpo-tiny", spec={}, created_by=alice, total_steps=100, last_seq=7)


@pytest.fixture
def api():
    return APIClient()


def add_points(run, key, values, start_step=0, t0=1_700_000_000.0):
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=start_step + i, key=key, value=v, wall_time=t0 + 2.0 * (start_step + i))
        for i, v in enumerate(values)
    )
