from datetime import timedelta

import pytest
from django.utils import timezone

from studio.fleet.models import WorkerNode

GPU = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_total_gb": 39.4, "memory_used_gb": 1.0, "utilization": 3}


@pytest.fixture
def nodes(db):
    online = WorkerNode.record_start("gpu@a", ["gpu"], [GPU, {**GPU, "index": 1}], concurrency=2)
    gone = WorkerNode.record_start("gpu@b", ["gpu"], [GPU], concurrency=1)
    WorkerNode.objects.filter(pk=gone.pk).update(last_seen=timezone.now() - timedelta(hours=2))
    return online, gone


def test_a_team_member_lists_the_workers_with_their_gpus(api, carol, nodes):
    api.force_authenticate(carol)
    response = api.get("/api/fleet/")
    assert response.status_code == 200
    by_host = {n["hostname"]: n for n in response.json()}
    assert set(by_host) == {"gpu@a", "gpu@b"}
    assert by_host["gpu@a"]["online"] is True and by_host["gpu@b"]["online"] is False
    assert by_host["gpu@a"]["gpu_count"] == 2
    assert by_host["gpu@a"]["gpus"][1] == {**GPU, "index": 1}
    assert by_host["gpu@a"]["queues"] == ["gpu"]


def test_online_only_leaves_out_silent_workers(api, alice, nodes):
    api.force_authenticate(alice)
    assert [n["hostname"] for n in api.get("/api/fleet/?online=1").json()] == ["gpu@a"]


def test_someone_in_no_team_may_not_list_workers(api, dana, nodes):
    api.force_authenticate(dana)
    assert api.get("/api/fleet/").status_code == 403


def test_an_anonymous_visitor_may_not_list_workers(api, nodes):
    assert api.get("/api/fleet/").status_code in (401, 403)


def test_the_fleet_is_read_only(api, alice, nodes):
    api.force_authenticate(alice)
    assert api.post("/api/fleet/", {"hostname": "x"}, format="json").status_code == 405
