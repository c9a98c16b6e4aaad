"""A run's tags (studio.runs.tags; issue 41's runs table filters on them): set whole from the run page's form and
`POST /api/runs/<id>/tags/` by editors and owners; a viewer gets 403 and changes nothing, an outsider 404; every
member sees them (the run page, the API, the runs table); a bad tag is a 400 naming `tags`."""

import pytest
from django.test import Client

from studio.runs.models import RunTag
from studio.runs.tags import set_tags


def tags_of(run) -> list[str]:
    return sorted(RunTag.objects.filter(run=run).values_list("name", flat=True))


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_owners_and_editors_set_the_tags_on_the_api(api, run, request, who):
    api.force_authenticate(request.getfixturevalue(who))
    response = api.post(f"/api/runs/{run.pk}/tags/", {"tags": ["lr-sweep", " baseline ", "lr-sweep"]}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"tags": ["baseline", "lr-sweep"]} and tags_of(run) == ["baseline", "lr-sweep"]
    assert api.get(f"/api/runs/{run.pk}/").json()["tags"] == ["baseline", "lr-sweep"]
    assert api.post(f"/api/runs/{run.pk}/tags/", {"tags": []}, format="json").json() == {"tags": []}
    assert tags_of(run) == []


def test_a_viewer_may_not_and_an_outsider_gets_404(api, run, carol, charlie):
    set_tags(run, ["keep"])
    api.force_authenticate(carol)
    assert api.get(f"/api/runs/{run.pk}/").json()["tags"] == ["keep"]  # a viewer sees them
    assert api.post(f"/api/runs/{run.pk}/tags/", {"tags": ["mine"]}, format="json").status_code == 403
    api.force_authenticate(charlie)
    assert api.post(f"/api/runs/{run.pk}/tags/", {"tags": ["mine"]}, format="json").status_code == 404
    assert tags_of(run) == ["keep"]


@pytest.mark.parametrize("bad", [["a b"], ["x" * 41], [3], [f"t{i}" for i in range(21)], ["semi;colon"]])
def test_a_bad_tag_is_a_400_naming_tags(api, run, alice, bad):
    api.force_authenticate(alice)
    response = api.post(f"/api/runs/{run.pk}/tags/", {"tags": bad}, format="json")
    assert response.status_code == 400 and "tags" in response.json(), response.content
    assert tags_of(run) == []


def test_the_run_page_shows_the_tags_and_its_form_sets_them_for_editors_only(run, bob, carol, charlie):
    set_tags(run, ["keep"])
    client = Client()
    client.force_login(carol)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'class="tag">keep<' in page and "data-tags-form" not in page  # a viewer: read-only
    assert client.post(f"/runs/{run.pk}/tags/", {"tags": "mine"}).status_code == 403
    client.force_login(charlie)
    assert client.post(f"/runs/{run.pk}/tags/", {"tags": "mine"}).status_code == 404
    client.force_login(bob)
    assert "data-tags-form" in client.get(f"/runs/{run.pk}/").content.decode()
    response = client.post(f"/runs/{run.pk}/tags/", {"tags": "baseline, lr-sweep keep"})
    assert response.status_code == 302 and tags_of(run) == ["baseline", "keep", "lr-sweep"]
    refused = client.post(f"/runs/{run.pk}/tags/", {"tags": "ok bad;tag"})
    assert refused.status_code == 400 and b"bad;tag" in refused.content
    assert tags_of(run) == ["baseline", "keep", "lr-sweep"]
    # the runs table shows them in the run's row and filters on them
    table = client.get("/runs/", {"tag": "lr-sweep"}).content.decode()
    assert 'class="tag">lr-sweep<' in table and f'id="run-{run.pk}"' in table
    assert f'id="run-{run.pk}"' not in client.get("/runs/", {"tag": "other"}).content.decode()
