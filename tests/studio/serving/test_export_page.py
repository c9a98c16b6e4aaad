"""The export page: who may open it and export, and a bad form answered 400 naming the field, before any
task is sent (the export itself is tests/workers/test_checkpoint_export.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from studio.runs.models import Checkpoint


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def with_checkpoint(run):
    Checkpoint.objects.create(run=run, step=5, path="/nowhere/step-5")
    return run


def test_members_open_it_viewers_cannot_export_and_outsiders_get_404(with_checkpoint, alice, carol, charlie):
    url = f"/runs/{with_checkpoint.pk}/export/"
    page = signed_in(alice).get(url).content.decode()
    assert 'name="step"' in page and "step 5" in page
    viewer = signed_in(carol)
    assert 'name="step"' not in viewer.get(url).content.decode()
    assert viewer.post(url, {"step": "5", "mode": "merged"}).status_code == 403
    assert signed_in(charlie).get(url).status_code == 404
    assert signed_in(charlie).get(f"{url}step-5-merged.zip").status_code == 404


@pytest.mark.parametrize(("form", "field"), [
    ({"step": "6", "mode": "merged"}, "step:"), ({"step": "5", "mode": "gguf"}, "mode:"),
    ({"step": "5", "mode": "merged", "folder": "relative/x"}, "folder:"),
    ({"step": "5", "mode": "merged", "folder": "/etc/studio-export"}, "folder:"),
])  # fmt: skip
def test_a_bad_form_is_refused_naming_the_field(with_checkpoint, bob, form, field):
    page = signed_in(bob).post(f"/runs/{with_checkpoint.pk}/export/", form)
    assert page.status_code == 400
    assert f"data-error>{field}" in page.content.decode()


def test_a_download_outside_the_runs_exports_is_not_served(with_checkpoint, alice):
    client = signed_in(alice)
    assert client.get(f"/runs/{with_checkpoint.pk}/export/..%2F..%2Fstudio.sqlite3").status_code == 404
    assert client.get(f"/runs/{with_checkpoint.pk}/export/missing.zip").status_code == 404
