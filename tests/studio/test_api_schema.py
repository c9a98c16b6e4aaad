"""The API against its own published schema (/api/schema/), driven by Schemathesis: every operation,
with data that fits the schema (about half of it naming the team's real objects) and data that does
not, answers no 500, answers only status codes its operation documents, and (for data that fits)
a body that matches the documented response.

Bounded: a fixed number of examples per operation, derandomized (the same cases each run), no
shrinking, and each operation rolled back to the same team's objects before the next."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
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


def rolled_back(run: Callable[[], None]) -> None:
    """`run()` inside a transaction that is then rolled back: one operation's requests leave nothing behind."""
    try:
        with transaction.atomic():
            run()
            raise Rollback
    except Rollback:
        pass


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
        rolled_back(check)
    except Unsatisfiable as exc:  # negative: an operation with nothing to send wrong (no parameters, no body)
        if mode is GenerationMode.POSITIVE:
            raise Rejected(f"{mode.value} {operation.label}: {exc}") from None
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every operation runs; failures listed at the end
        raise Rejected(f"{mode.value} {operation.label}: {exc}") from None


# Refusals of a request the schema accepts that no JSON schema can state: what the request names (an id, a
# user, a folder) that does not exist or may not be used, a name taken, a rule between two fields, what the
# server's own state decides. Each field's description says it in words. (key pattern, message pattern);
# a key is dotted as the answer nests it ("spec.criteria.0.name").
STATED_EVERYWHERE = [
    (r".*", r"does not exist|no such|not found|no \w+ of this team has this id|has no rollout|Invalid pk"),
    (r"name", r"already exists"),  # a team's name is unique
    (r"non_field_errors", r"Unable to log in"),  # a password that is not the user's
    (r"cursor", r"not a cursor this endpoint gave out"),  # opaque: only the server makes one
    # Settings: text that must parse (a regex, code; code that defines the function its description names),
    # an order between two settings, one setting that another's value requires.
    (
        r".+\..+",
        r"invalid regular expression|syntax error|must define a top-level function|needs a |must be (above|below)|must not exceed|"
        r"must lie between|name the split|set a held-out dataset|in formula|invalid formula|not both|must contain \{|must lie in|"
        r"is (above|below)|give .+, or |it needs mode ",
    ),  # fmt: skip
]
STATED = {
    "POST /api/datasets/": [
        (r"file", r"give either a file to upload or a server-side path"),
        (r"path", r"outside the folders data may be read from"),
        (r"file|path", r"cannot tell the format"),
        (r"split", r"a split is a name"),
    ],
    "PUT /api/datasets/{id}/": [(r"path|file|team", r"cannot change; create a new one"),
                                (r"split", r"a split is a name"),
                                (r"prompt_field", r"set prompt_field or messages_field")],
    "POST /api/experiments/": [(r"environment_version", r"has versions"), (r"dataset", r"choose a dataset"),
                               (r"model\.path", r"is not a local folder")],
    "POST /api/experiments/{id}/launch/": [(r"eval\.checkpoint", r"does not exist"),
                                           (r"model\.path", r"is not a local folder")],  # as the experiment's
    "PUT /api/experiments/{experiment_id}/mirror-settings/": [(r"inherit", r"must be true .* or false")],
    "POST /api/teams/{team_id}/tracker-secrets/": [(r"endpoint", r"required: the server this secret")],
    "POST /api/environments/{id}/try/": [(r"model", r"give a model path or a checkpoint"),
                                         (r"rows", r"give at least one row"),
                                         (r"rows\.\d+", r"a row needs a prompt")],
    "POST /api/rubrics/{id}/try/": [(r"pairs", r"give at least one")],
    "GET /api/runs/{run_id}/metrics/": [(r"detail", r"is after end|is after step_max")],
    "GET /api/runs/{id}/rollouts/": [(r"criterion", r"need a criterion")],
    "GET /api/runs/groups/": [(r"sort", r"holds several seeds")],  # grouped by all but the seed: sort by another
    "POST /api/ingest/verl/": [(r"rollout_files", r"upload verl's rollout or validation dump files"),
                               (r"\w+_files", r"verl names its dumps"),
                               (r"experiment", r"A valid integer is required")],  # a form says no null
}  # fmt: skip
# A suite's task: a dataset or generated prompts (one of the two), and a procedural task's band in order.
STATED["POST /api/suites/"] = [
    (r"tasks\.\d+\.dataset", r"choose a dataset, or a procedural task instead"),
    (r"tasks\.\d+\.procedural\.target_band", r"target_band must be \[low, high\]"),
]
STATED["PUT /api/suites/{id}/"] = STATED["PATCH /api/suites/{id}/"] = STATED["POST /api/suites/"]
STATED["PATCH /api/datasets/{id}/"] = STATED["PUT /api/datasets/{id}/"]
STATED["PUT /api/experiments/{id}/"] = STATED["PATCH /api/experiments/{id}/"] = STATED["POST /api/experiments/"]
STRICT_EXAMPLES = int(os.environ.get("STUDIO_STRICT_EXAMPLES", 3))  # per operation; more in the -m slow fuzz


def refusals(answer: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, message) of each refusal in a 400's body."""
    if isinstance(answer, list):
        return [pair for item in answer for pair in refusals(item, prefix)] if answer else [(prefix, "")]
    if isinstance(answer, dict):
        return [pair for key, value in answer.items() for pair in refusals(value, f"{prefix}.{key}".lstrip("."))]
    return [(prefix, str(answer))]


def unstated(label: str, answer: Any) -> list[tuple[str, str]]:
    allowed = STATED_EVERYWHERE + STATED.get(label, [])
    return [(key, message) for key, message in refusals(answer)
            if not any(re.fullmatch(k, key) and re.search(m, message) for k, m in allowed)]  # fmt: skip


def media_type(operation) -> str | None:
    """JSON where the operation takes it, multipart where its body holds a file (JSON carries none): a form's
    flat strings cannot say null, a list or an object, which the schema's types do."""
    body = operation.definition.raw.get("requestBody", {}).get("content", {})
    components = operation.schema.raw_schema["components"]["schemas"]
    refs = [content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] for content in body.values()]
    if any("binary" in json.dumps(components.get(ref, {})) for ref in refs):
        return "multipart/form-data"
    return "application/json" if "application/json" in body else None


def required_fields(operation) -> list[str]:
    """The fields the operation's request body requires, in the media type the check sends."""
    content = operation.definition.raw.get("requestBody", {}).get("content", {}).get(media_type(operation) or "", {})
    ref = content.get("schema", {}).get("$ref", "")
    body = operation.schema.raw_schema["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {}) if ref else {}
    return body.get("required", [])


def strict_strategy(operation, world):
    wanted = media_type(operation)
    if wanted is not None:  # as_strategy(media_type=) names the header only: keep the one body to draw from
        operation.body.items = [body for body in operation.body.items if body.media_type == wanted]
    made = operation.as_strategy(generation_mode=GenerationMode.POSITIVE, media_type=media_type(operation),
                                 path_parameters=real_ids(operation.path, world["ids"]))  # fmt: skip
    return made.map(lambda case: with_real_objects(case, world["body"]))


def strictly(operation, world, examples: int, found: dict[str, list[str]]) -> None:
    """Send `examples` requests the schema accepts; note each refusal it does not state (found["loose"]),
    and, for each request taken, each required field whose absence is not refused (found["not_required"])."""
    headers = {"Authorization": f"Token {world['token']}"}
    required = required_fields(operation)

    @given(case=strict_strategy(operation, world))
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    def check(case):
        found["sent"].append(operation.label)
        response = case.call(headers=headers)
        if response.status_code == 400:
            for key, message in unstated(operation.label, response.json()):
                found["loose"].append(f"{operation.label}: {key}: {message[:200]} ({case.media_type})")
        elif response.status_code < 300 and isinstance(case.body, dict):
            for name in required:  # the reverse: what the schema requires, the server requires
                case.body, whole = {k: v for k, v in case.body.items() if k != name}, case.body
                answer = case.call(headers=headers)
                case.body = whole
                if answer.status_code != 400 or name not in answer.json():
                    found["not_required"].append(f"{operation.label}: without {name}: {answer.status_code}")

    rolled_back(check)


def test_the_schema_is_as_strict_as_the_serializers(world, app, monkeypatch):
    """Requests the schema accepts (its own data, naming the team's real objects) are refused only for a
    stated reason; and a body without a field the schema requires is refused naming that field."""
    monkeypatch.setattr(logging.getLogger("django.request"), "level", logging.ERROR)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", app)
    found: dict[str, list[str]] = {"sent": [], "loose": [], "not_required": []}
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:
        strictly(operation, world, STRICT_EXAMPLES, found)
    loose, not_required = sorted(set(found["loose"])), sorted(set(found["not_required"]))
    print(f"strict schema: {len(operations)} operations, {len(found['sent'])} requests, "
          f"{len({line.split(':')[0] for line in loose})} operations refusing for an unstated reason, "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip
    assert len(operations) >= 60
    assert loose == [], "\n".join(loose)
    assert not_required == [], "\n".join(not_required)


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
    # Stop: an optional body, {checkpoint: false} for "Stop now" (issue 39); a bare POST stops and saves.
    cancel = schema["paths"]["/api/runs/{id}/cancel/"]["post"]["requestBody"]
    assert not cancel.get("required")
    body = cancel["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert schema["components"]["schemas"][body]["properties"]["checkpoint"]["type"] == "boolean"
    note = schema["components"]["schemas"]["NoteInRequest"]
    assert note["required"] == ["text"]
    upload = schema["components"]["schemas"]["DatasetRequest"]["properties"]["file"]
    assert upload["format"] == "binary"
