"""GET /api/runs/<id>/metrics/: downsampled curves for team members, 404 for everyone else."""

from tests.studio.records import add_points


def url(run, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/runs/{run.pk}/metrics/" + (f"?{query}" if query else "")


def test_the_owner_gets_every_key_downsampled_with_the_cursor(api, alice, run):
    add_points(run, "reward/mean", [float(i % 10) for i in range(3000)])
    add_points(run, "actor/kl", [0.1, 0.2])
    api.force_authenticate(alice)
    resp = api.get(url(run, points=100))
    assert resp.status_code == 200
    body = resp.json()
    assert body["cursor"] == 7
    assert body["keys"] == ["actor/kl", "reward/mean"]
    reward = body["series"]["reward/mean"]
    assert len(reward["x"]) == 100
    assert min(reward["y_min"]) == 0.0 and max(reward["y_max"]) == 9.0
    assert body["series"]["actor/kl"]["y"] == [0.1, 0.2]


def test_a_viewer_reads_the_curves_too(api, carol, run):
    add_points(run, "reward/mean", [1.0])
    api.force_authenticate(carol)
    assert api.get(url(run)).json()["series"]["reward/mean"]["y"] == [1.0]


def test_an_outsider_gets_404(api, charlie, run):
    api.force_authenticate(charlie)
    assert api.get(url(run)).status_code == 404


def test_an_anonymous_visitor_without_a_share_link_is_refused(api, run):
    assert api.get(url(run)).status_code in (401, 403)
    assert api.get(url(run, share="not-a-token")).status_code == 404


def test_it_sends_only_the_keys_asked_for(api, alice, run):
    add_points(run, "reward/mean", [1.0])
    add_points(run, "actor/kl", [2.0])
    api.force_authenticate(alice)
    body = api.get(url(run, keys="actor/kl,nope")).json()
    assert list(body["series"]) == ["actor/kl"]
    assert body["keys"] == ["actor/kl", "reward/mean"]


def test_zooming_in_returns_the_detail_of_the_window(api, alice, run):
    add_points(run, "reward/mean", [float(i) for i in range(10_000)])
    api.force_authenticate(alice)
    body = api.get(url(run, start=500, end=599, points=1000)).json()
    assert body["series"]["reward/mean"]["x"] == [float(s) for s in range(500, 600)]


def test_it_names_the_bad_parameter(api, alice, run):
    api.force_authenticate(alice)
    resp = api.get(url(run, points="many"))
    assert resp.status_code == 400
    assert "points" in resp.json()
    resp = api.get(url(run, x="epoch"))
    assert resp.status_code == 400
    assert "x must be one of" in resp.json()["detail"]


def test_each_series_carries_its_last_step_in_wall_time_mode(api, alice, run):
    add_points(run, "actor/kl", [0.1, 0.2, 0.3], start_step=4)
    api.force_authenticate(alice)
    kl = api.get(url(run, x="time")).json()["series"]["actor/kl"]
    assert kl["x"] == [1_700_000_008.0, 1_700_000_010.0, 1_700_000_012.0] and kl["last_step"] == 6
