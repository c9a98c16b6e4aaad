"""Fixtures of the pytest-style studio tests: the people of tests/studio/people.py, each created
on request with their role, a run of Alice's team and a rollout in it."""

import pytest
from rest_framework.test import APIClient

from studio.runs.models import Run
from tests.studio.people import person, the_team
from tests.studio.records import make_rollout


@pytest.fixture
def team(db):
    return the_team()


@pytest.fixture
def alice(team):
    return person("alice")


@pytest.fixture
def bob(team):
    return person("bob")


@pytest.fixture
def carol(team):
    return person("carol")


@pytest.fixture
def charlie(db):
    return person("charlie")


@pytest.fixture
def dana(db):
    return person("dana")


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def run(team, alice):
    return Run.objects.create(team=team, name="grpo-tiny", spec={}, created_by=alice, total_steps=100, last_seq=7)


@pytest.fixture
def rollout(run):
    return make_rollout(run, step=3, sample_index=0)


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Each test gets its own channel layer. A layer keeps receive state bound to the event loop that
    used it (channels_redis's receive lock and count), and a test whose consumers were still receiving
    when its loop closed leaves that state to the next test: "Lock ... is bound to a different event
    loop" in test_share_links, once, in the PostgreSQL + Redis pass."""
    yield
    from channels.layers import channel_layers

    channel_layers.backends.clear()
