"""The run page, the shared run page and the compare page render for who may see them."""

import json
import re

from studio.runs.models import Run, RunEvent
from studio.sharing.models import ShareLink


def page_config(html: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def test_the_run_page_hands_its_js_the_run_and_what_the_user_may_do(client, bob, run):
    RunEvent.objects.create(run=run, seq=1, kind="log", payload={"line": "loading model"}, created=1.0)
    client.force_login(bob)
    resp = client.get(f"/runs/{run.pk}/")
    assert resp.status_code == 200
    config = page_config(resp.content.decode(), "run-config")
    assert config["run"]["id"] == run.pk and config["run"]["name"] == "grpo-tiny"
    assert config["can_note"] and config["can_share"] and config["share_token"] is None
    assert config["log_lines"] == ["loading model"]


def test_a_viewer_gets_a_page_without_note_or_share_forms(client, carol, run):
    client.force_login(carol)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    config = page_config(html, "run-config")
    assert not config["can_note"] and not config["can_share"]
    assert "data-share-panel" not in html and "data-note-form" not in html


def test_plotly_comes_from_the_studio_not_a_cdn(client, alice, run):
    client.force_login(alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<script src="/static-vendor/plotly.min.js?v=' in html
    assert "cdn" not in html.lower()


def test_an_outsider_gets_404(client, charlie, run):
    client.force_login(charlie)
    assert client.get(f"/runs/{run.pk}/").status_code == 404


def test_a_stranger_is_sent_to_log_in(client, run):
    resp = client.get(f"/runs/{run.pk}/")
    assert resp.status_code == 302 and "next=" in resp["Location"]


def test_a_share_link_renders_the_run_read_only(client, alice, run):
    link = ShareLink.objects.create(run=run, created_by=alice)
    resp = client.get(f"/share/{link.token}/")
    assert resp.status_code == 200
    html = resp.content.decode()
    config = page_config(html, "run-config")
    assert config["share_token"] == link.token and not config["can_note"]
    assert "data-readonly-banner" in html and "data-share-panel" not in html


def test_an_unknown_share_token_is_404(client, db):
    assert client.get("/share/not-a-token/").status_code == 404


def test_the_compare_page_lists_the_users_runs(client, alice, team, run):
    Run.objects.create(team=team, name="second", spec={})
    client.force_login(alice)
    resp = client.get(f"/compare/?runs={run.pk}")
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "grpo-tiny" in html and "second" in html
    assert page_config(html, "compare-config") == {"selected": [run.pk]}


def test_the_run_page_sets_the_csrf_cookie_its_js_posts_with(client, alice, run):
    client.force_login(alice)
    resp = client.get(f"/runs/{run.pk}/")
    assert "csrftoken" in resp.cookies
