"""The check of every row of a long file, on a real Celery worker (workers.check_dataset, default
queue), off the request that uploaded it: `checking` until it ends `ready` or `refused`."""

from __future__ import annotations

import io
import json
import time
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import override_settings

from studio.datasets import checks
from studio.datasets.models import CHECKING, READY, REFUSED, Dataset
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from tests.studio.base import RUBRIC
from tests.studio.datasets.conftest import start_check_worker

ROWS = 1500  # past the 1,000 rows a request reads
pytestmark = pytest.mark.slow


def jsonl(n: int, *, bad_at: int | None = None, prompt: str = "What is {i} + 1?") -> bytes:
    lines = [json.dumps({"prompt": prompt.format(i=i), "answer": str(i + 1)}) for i in range(n)]
    if bad_at is not None:
        lines[bad_at - 1] = "{not json"
    return "".join(line + "\n" for line in lines).encode()


def upload(api, user, team, name: str, content: bytes, **fields):
    file = io.BytesIO(content)
    file.name = name
    api.force_authenticate(user)
    return api.post("/api/datasets/", {"team": team.pk, "name": name, "file": file, **fields}, format="multipart")


@contextmanager
def reads_without_table_locks():
    """Under SQLite's in-memory test database (shared cache) a table read-lock held by this thread's poll
    makes the worker's write fail at once with "table is locked" (SQLITE_LOCKED: no busy timeout applies);
    a database file, as the studio uses, would make it wait. read_uncommitted takes no read-locks. A no-op
    on PostgreSQL."""
    sqlite = connection.vendor == "sqlite"
    if sqlite:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")
    try:
        yield
    finally:
        if sqlite:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA read_uncommitted = 0")


def wait_until_checked(dataset_id: int, timeout: float = 60) -> Dataset:
    deadline = time.monotonic() + timeout
    with reads_without_table_locks():
        while (dataset := Dataset.objects.get(pk=dataset_id)).status == CHECKING:
            assert time.monotonic() < deadline, f"still checking after {timeout} s: {dataset.status_detail}"
            time.sleep(0.1)
    return dataset


def uploaded_files(data_dir) -> list:
    folder = data_dir / "datasets"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_long_upload_is_checked_on_the_worker_and_cannot_launch_until_ready(api, bob, team, data_dir,
                                                                              transactional_db):  # fmt: skip
    response = upload(api, bob, team, "long.jsonl", jsonl(ROWS, bad_at=1400))
    assert response.status_code == 201, response.content
    assert (response.json()["status"], response.json()["row_count"]) == ("checking", 1000)
    dataset = Dataset.objects.get(pk=response.json()["id"])
    rubric = Rubric.objects.create(team=team, name="r", spec=RUBRIC)
    experiment = Experiment.objects.create(team=team, name="e", dataset=dataset, rubric=rubric, model_path="/m")
    launch = api.post(f"/api/experiments/{experiment.pk}/launch/")
    assert launch.status_code == 400
    assert launch.json()["dataset"].startswith("dataset 'long.jsonl' is still being checked (1,000 rows so far)")

    with start_check_worker():  # the message waits in the broker until a worker takes it
        dataset = wait_until_checked(dataset.pk)
    assert (dataset.status, dataset.row_count, dataset.error_count) == (READY, ROWS, 1)
    assert dataset.errors == [{"row": 1400, "field": None, "message": "not valid JSON: Expecting property name "
                               "enclosed in double quotes (column 2)"}]  # fmt: skip
    assert api.get(f"/api/datasets/{dataset.pk}/").json()["status"] == "ready"
    launch = api.post(f"/api/experiments/{experiment.pk}/launch/")
    assert launch.json()["dataset"].startswith(f"1 of {ROWS:,} rows invalid in 'long.jsonl' (row 1400: not valid JSON")
    assert "field mapping" not in launch.json()["dataset"]  # a broken row: the mapping cannot help


def test_a_long_file_that_breaks_after_its_head_is_refused_and_its_upload_deleted(
    api, bob, team, data_dir, check_worker
):
    rows = [{"prompt": f"q{i}", "answer": str(i)} for i in range(ROWS)]
    content = json.dumps(rows, indent=0).encode()[:-40]  # a .json list cut off, as by a failed download
    response = upload(api, bob, team, "cut.json", content)
    assert (response.status_code, response.json()["status"]) == (201, "checking")
    assert len(uploaded_files(data_dir)) == 1
    dataset = wait_until_checked(response.json()["id"])
    assert dataset.status == REFUSED
    assert dataset.status_detail.startswith("cut.json line ")
    assert "invalid JSON" in dataset.status_detail
    assert uploaded_files(data_dir) == []
    body = api.get(f"/api/datasets/{dataset.pk}/").json()
    assert (body["status"], body["status_detail"]) == ("refused", dataset.status_detail)
    preview = api.get(f"/api/datasets/{dataset.pk}/preview/")
    assert preview.status_code == 400 and "the dataset was refused: cut.json line" in preview.json()["detail"]


@override_settings(LONG_PROMPT_CHARS=100)
def test_the_check_warns_about_prompts_longer_than_the_threshold(api, bob, team, data_dir, check_worker):
    content = jsonl(ROWS - 3) + jsonl(3, prompt="{i}" + "x" * 150)
    response = upload(api, bob, team, "long-prompts.jsonl", content)
    assert response.json()["warnings"] == []  # the long rows lie past the request's head
    dataset = wait_until_checked(response.json()["id"])
    [warning] = api.get(f"/api/datasets/{dataset.pk}/").json()["warnings"]
    assert {k: warning[k] for k in ("code", "rows", "threshold_chars", "longest_chars", "longest_row")} == {
        "code": "long_prompts", "rows": 3, "threshold_chars": 100, "longest_chars": 151, "longest_row": ROWS - 2,
    }  # fmt: skip
    assert warning["message"].startswith("3 rows have a prompt longer than 100 characters (about 25 tokens)")
    assert dataset.longest_prompt_chars == 151


def test_a_check_that_a_newer_one_replaced_writes_nothing(api, bob, team, data_dir):
    response = upload(api, bob, team, "long.jsonl", jsonl(ROWS))
    dataset = Dataset.objects.get(pk=response.json()["id"])
    stale = dataset.check_generation
    api.patch(f"/api/datasets/{dataset.pk}/", {"prompt_field": "answer"}, format="json")  # a new check
    assert checks.check_every_row(dataset.pk, stale) == checks.SUPERSEDED
    dataset.refresh_from_db()
    assert (dataset.status, dataset.row_count, dataset.check_generation) == (CHECKING, 1000, stale + 1)
    assert checks.check_every_row(dataset.pk, stale + 1) == READY
    assert Dataset.objects.get(pk=dataset.pk).row_count == ROWS


def test_a_check_whose_message_was_lost_is_sent_again_at_start_up(api, bob, team, data_dir, transactional_db):
    response = upload(api, bob, team, "long.jsonl", jsonl(ROWS))
    from studio.celery import app

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge("default")  # as a restarted embedded Redis loses it
    assert checks.requeue_checking() == [response.json()["id"]]
    with start_check_worker():
        assert wait_until_checked(response.json()["id"]).row_count == ROWS
