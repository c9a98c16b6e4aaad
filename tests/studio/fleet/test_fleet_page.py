from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from studio.fleet.models import WorkerNode

GPU = {"index": 0, "name": "NVIDIA L4", "memory_total_gb": 22.5, "memory_used_gb": 7.25, "utilization": 80}


@pytest.fixture
def nodes(db):
    WorkerNode.record_start("gpu@zeta", ["gpu"], [GPU], concurrency=1)
    old = WorkerNode.record_start("gpu@alpha", ["gpu"], [], concurrency=1)
    WorkerNode.objects.filter(pk=old.pk).update(last_seen=timezone.now() - timedelta(hours=1))


def test_the_page_lists_online_workers_first_with_gpu_memory(client, alice, nodes):
    client.force_login(alice)
    html = client.get("/fleet/").content.decode()
    assert "1 online of 2" in html
    assert html.index("gpu@zeta") < html.index("gpu@alpha")  # online first, although alpha sorts first
    assert "NVIDIA L4 — 7.25 / 22.5 GB" in html
    assert "not responding" in html


def test_an_empty_fleet_says_how_to_start_a_worker(client, alice):
    client.force_login(alice)
    assert "--queues gpu" in client.get("/fleet/").content.decode()


def test_someone_in_no_team_gets_403(client, dana, nodes):
    client.force_login(dana)
    assert client.get("/fleet/").status_code == 403


def test_an_anonymous_visitor_is_sent_to_log_in(client, nodes):
    response = client.get("/fleet/")
    assert response.status_code == 302


def test_the_page_comes_from_the_shared_templates_folder_like_every_other_app(client, alice):
    client.force_login(alice)
    templates = {t.name: Path(t.origin.name) for t in client.get("/fleet/").templates}
    shared = Path(settings.BASE_DIR) / "frontend" / "templates"
    assert templates["fleet/page.html"] == shared / "fleet" / "page.html"
    assert templates["fleet/section.html"] == shared / "fleet" / "section.html"
