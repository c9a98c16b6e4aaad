"""The API against its own published schema (/api/schema/), driven by Schemathesis: every operation,
with data that fits the schema (about half of it naming the team's real objects) and data that does
not, answers no 500, answers only status codes its operation documents, and (for data that fits)
a body that matches the documented response.

Bounded: a fixed number of examples per operation, derandomized (the same cases each run), no
shrinking, and each operation rolled back to the same team's objects before the next."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import pytest
import schemathesis
import yaml
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from studio.celery import SCORE_RUBRIC_TASK, TRY_ENVIRONMENT_TASK
from studio.celery import app as celery_app
from studio.environments.models import Environment
from studio.experiments.models import Experiment
from studio.rubrics.models import Rubric
from studio.runs.models import Checkpoint, Run
from studio.sharing.models import Note, ShareLink
from tests.studio.base import ROWS, RUBRIC, write_jsonl
from tests.studio.environment_kind import CONFIG
from tests.studio.people import person, the_team
from tests.studio.records import make_rollout

POSITIVE_EXAMPLES = int(os.environ.get("STUDIO_FUZZ_EXAMPLES", 25))  # per operation, about half with real ids
NEGATIVE_EXAMPLES = POSITIVE_EXAMPLES // 2
POSITIVE_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
NEGATIVE_CHECKS = [not_a_server_error, status_code_conformance]
# The ids a path parameter names, by parameter and (for `id`) by the collection in front of it.
COLLECTIONS = ("teams", "datasets", "rubrics", "environments", "experiments", "runs")


class Rollback(Exception):
    """Raised to undo what one operation's examples wrote."""


class Rejected(Exception):
    """One operation's failure, kept until every operation has run."""


@pytest.fixture
def world(db, settings, tmp_path):
    """Alice's team with one of everything, Alice's token, and Bob as an editor (a member to remove)."""
    settings.DATA_DIR = tmp_path / "var"
    settings.DATA_DIR.mkdir()
    settings.DATASET_ROOTS = [tmp_path]
    from studio.datasets import storage
    from studio.datasets.models import Dataset

    team, alice, bob = the_team(), person("alice"), person("bob")
    dataset = Dataset(team=team, name="qa", source="server_file", path=str(write_jsonl(tmp_path / "qa.jsonl", ROWS)),
                      format="jsonl")  # fmt: skip
    storage.refresh(dataset)
    dataset.save()
    rubric = Rubric.objects.create(team=team, name="Correct", spec=RUBRIC, created_by=alice)
    environment = Environment.objects.create(team=team, name="countdown", config=CONFIG, created_by=alice)
    environment.record_version(alice)
    experiment = Experiment.objects.create(team=team, name="Exp", dataset=dataset, rubric=rubric,
                                           model_path="/models/tiny", config={"optim": {"total_steps": 5}},
                                           created_by=alice)  # fmt: skip
    run = Run.objects.create(team=team, experiment=experiment, name="run", spec=experiment.spec_config(),
                             state="failed", created_by=alice, total_steps=5, last_seq=3)  # fmt: skip
    rollout = make_rollout(run, step=1)
    Checkpoint.objects.create(run=run, step=1, path=str(tmp_path / "var" / "runs" / str(run.pk) / "step-1"))
    note = Note.objects.create(run=run, rollout=rollout, author=alice, tag="look", text="odd")
    link = ShareLink.objects.create(run=run, label="reviewer", created_by=alice)
    ids = {
        "teams": team.pk, "datasets": dataset.pk, "rubrics": rubric.pk, "environments": environment.pk,
        "experiments": experiment.pk, "runs": run.pk, "user_id": bob.pk, "rollout_id": rollout.pk,
        "prompt_id": rollout.prompt_id, "run_id": run.pk, "note_id": note.pk, "link_id": link.pk,
    }  # fmt: skip
    body = {"team": team.pk, "dataset": dataset.pk, "rubric": rubric.pk, "environment": environment.pk}
    return {"ids": ids, "body": body, "token": Token.objects.create(user=alice).key}


class Answered:
    """What send_task returns here: a task result that is already in."""

    state, info = "SUCCESS", None

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def get(self, **_: Any) -> dict[str, Any]:
        return self.answer

    def revoke(self, **_: Any) -> None:
        pass


def worker_answer(name: str, args=(), **_: Any) -> Answered:
    """A worker's answer in its documented shape, without a worker: the try-its' 200 is checked too."""
    if name == SCORE_RUBRIC_TASK:
        return Answered({"results": [{"reward": 1.0, "passed": True, "error": None, "scores": {}} for _ in args[1]]})
    if name == TRY_ENVIRONMENT_TASK:
        episode = {"messages": [], "turns": [], "end_reason": "done", "error": None, "final_text": ""}
        return Answered({"episodes": [[episode] * args[3] for _ in args[2]]})
    return Answered({})


@pytest.fixture
def app(monkeypatch):
    """The studio as a WSGI app that keeps the test's database connection (and transaction) open."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    monkeypatch.setattr(celery_app, "send_task", worker_answer)
    yield WSGIHandler()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def real_ids(path: str, ids: dict[str, Any]) -> dict[str, Any]:
    """The path parameters of `path` set to the team's objects."""
    out = {}
    for part_before, part in zip(path.split("/"), path.split("/")[1:], strict=False):
        name = part.strip("{}")
        if part.startswith("{"):
            out[name] = ids[part_before] if name == "id" and part_before in COLLECTIONS else ids.get(name)
    return {k: v for k, v in out.items() if v is not None}


def with_real_objects(case, body: dict[str, Any]):
    """`case` whose body names the team's real team, dataset, rubric and environment where it names one."""
    if isinstance(case.body, dict):
        for key, value in body.items():
            if key in case.body:
                case.body[key] = value
    return case


def strategy(operation, mode: GenerationMode, world):
    made = operation.as_strategy(generation_mode=mode)
    if mode is GenerationMode.NEGATIVE:
        return made
    real = operation.as_strategy(generation_mode=mode, path_parameters=real_ids(operation.path, world["ids"]))
    return st.one_of(made, real.map(lambda case: with_real_objects(case, world["body"])))


def exercise(operation, mode: GenerationMode, world, examples: int, counter: list[int]) -> None:
    checks = POSITIVE_CHECKS if mode is GenerationMode.POSITIVE else NEGATIVE_CHECKS
    headers = {"Authorization": f"Token {world['token']}"}

    @given(case=strategy(operation, mode, world))
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    def check(case):
        counter[0] += 1
        response = case.call(headers=headers)
        case.validate_response(response, checks=checks, headers=headers)

    try:
        with transaction.atomic():
            check()
            raise Rollback
    except Rollback:
        pass
    except Unsatisfiable as exc:  # negative: an operation with nothing to send wrong (no parameters, no body)
        if mode is GenerationMode.POSITIVE:
            raise Rejected(f"{mode.value} {operation.label}: {exc}") from None
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every operation runs; failures listed at the end
        raise Rejected(f"{mode.value} {operation.label}: {exc}") from None


@pytest.mark.slow
def test_every_operation_answers_what_its_schema_says_and_never_500(world, app, monkeypatch):
    monkeypatch.setattr(logging.getLogger("django.request"), "level", logging.ERROR)  # 4xx are expected here
    schema = schemathesis.openapi.from_wsgi("/api/schema/", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    failures, counter, started = [], [0], time.monotonic()
    for operation in operations:
        for mode, examples in (
            (GenerationMode.POSITIVE, POSITIVE_EXAMPLES),
            (GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES),
        ):
            try:
                exercise(operation, mode, world, examples, counter)
            except Rejected as exc:
                failures.append(str(exc))
    took = time.monotonic() - started
    print(f"schemathesis: {len(operations)} operations, {counter[0]} examples, {took:.0f} s")
    assert len(operations) >= 60
    assert not failures, f"{len(failures)} of {2 * len(operations)} operation runs failed:\n\n" + "\n\n".join(failures)


def test_the_schema_is_valid_openapi_built_without_a_warning(tmp_path):
    """Every view says what it takes and answers (drf-spectacular warns where it has to guess)."""
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "schema.yaml"))
    schema = yaml.safe_load((tmp_path / "schema.yaml").read_text())
    operations = {(path, method): op for path, ops in schema["paths"].items() for method, op in ops.items()}
    only_success = [key for key, op in operations.items() if all(code < "300" for code in op["responses"])]
    assert only_success == []
    assert schema["paths"]["/api/runs/{id}/cancel/"]["post"].get("requestBody") is None
    note = schema["components"]["schemas"]["NoteInRequest"]
    assert note["required"] == ["text"]
    upload = schema["components"]["schemas"]["DatasetRequest"]["properties"]["file"]
    assert upload["format"] == "binary"
