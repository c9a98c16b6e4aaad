"""The permission matrix: every API endpoint and the run websocket, against every role.

Who may do what (studio/accounts/permissions.py is the code; these tables are the policy):
- members of a team (owner, editor, viewer) read the team's datasets, rubrics, environments, experiments,
  runs, rollouts, curves, notes and members: 200;
- owners and editors also create, edit, delete, launch, clone, cancel, resume and evaluate,
  add notes and make or revoke share links; a viewer who tries gets 403;
- owners alone add, change and remove members (editors and viewers: 403);
- a note is deleted by its author or a team owner (any other member: 403);
- people outside the team (charlie owns another team) get 404 for everything of the team,
  as if it did not exist: nothing tells them it does; lists show them their own teams' rows;
- anonymous requests get 403: SessionAuthentication comes first, so DRF answers 403 rather
  than 401 (no WWW-Authenticate challenge). The OpenAPI schema alone is public;
- a guest (anonymous, holding a live share link: `?share=<token>`) reads the shared run's
  curves, rollouts and notes, and changes nothing;
- anyone signed in may create a team (and owns it), fetch their token and read the catalog
  (presets, settings schema, criterion kinds); the worker fleet is shown to members of any team;
- the websocket /ws/runs/<id>/ opens (hello, then events) for members of the run's team, by
  session cookie or API token, and for a live share link; everyone else is closed with 4403,
  the same for a run that does not exist. A page of another site is refused at the handshake.

Each cell runs on its own objects where the action changes or deletes them (a fresh queued
run per cancel, a fresh dataset per delete), so the cells do not depend on one another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import count
from typing import Any
from unittest import mock

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from studio.accounts.models import VIEWER, Team
from studio.asgi import application
from studio.environments.models import Environment
from studio.evaluations.models import Suite, SuiteResult, SuiteRun, TrainingSuite
from studio.experiments.models import Experiment
from studio.ingest import services as ingest_services
from studio.ingest.models import RunToken
from studio.rubrics.models import Rubric
from studio.runs import events
from studio.runs.models import Checkpoint, PromptStat, Rollout, Run
from studio.sharing.models import Note, ShareLink
from studio.sweeps.models import T_COMPLETE, Sweep, Trial
from studio.tracking import services as tracking_services
from tests.studio import people
from tests.studio.base import RUBRIC, StudioTestCase, model_folder
from tests.studio.environment_kind import CONFIG as ENVIRONMENT
from tests.studio.records import prompt_of

ROLES = ("owner", "editor", "viewer", "outsider", "anonymous")
USERS = people.BY_ROLE

OTHER_RUBRIC = {"criteria": [{"name": "has_four", "kind": "contains", "weight": 1.0, "params": {"keywords": ["4"]}}]}
PAIRS = [{"prompt": "What is 2+2?", "completion": "4", "answer": "4"}]
TRY_ROWS = {"rows": [{"prompt": "Count down"}], "model": "/models/tiny"}
EXPERIMENT = {"team": "{team}", "name": "made", "dataset": "{dataset}", "rubric": "{rubric}",
              "model_path": "/models/tiny", "config": {"optim": {"total_steps": 5}}}  # fmt: skip
SWEEP = {"experiment": "{experiment}", "parameters": [{"name": "optim.lr", "kind": "float", "low": 1e-6, "high": 1e-2}],
         "sampler": "random", "max_trials": 2, "max_concurrent": 1}  # fmt: skip
SUITE = {"team": "{team}", "name": "made", "tasks": [{"name": "qa", "dataset": "{dataset}", "rubric": "{rubric}"}]}


@dataclass(frozen=True)
class Row:
    """One endpoint and the status each role gets: `expect` is the policy, role -> status.

    `{name}` in the url or body is filled per cell by StudioCells.cell_<name>: names starting
    with `fresh_` (or naming one-off objects such as `queued_run`) make a new object each cell.
    `guest` is the status of an anonymous request holding a live share link to {run}.
    """

    method: str
    url: str
    expect: dict[str, int]
    body: Any = None
    guest: int | None = None

    def __str__(self) -> str:
        return f"{self.method} {self.url}"


def row(method: str, url: str, owner: int, editor: int, viewer: int, outsider: int, anonymous: int, *,
        body: Any = None, guest: int | None = None) -> Row:  # fmt: skip
    expect = dict(zip(ROLES, (owner, editor, viewer, outsider, anonymous), strict=True))
    return Row(method, url, expect, body, guest)


# fmt: off
API_POLICY = [
    #   method    url                                              owner edit  view  outs  anon
    # --- teams and members: owners manage members; teams are created, never renamed or deleted here
    row("GET",    "/api/teams/",                                   200,  200,  200,  200,  403),
    row("POST",   "/api/teams/",                                   201,  201,  201,  201,  403, body={"name": "{fresh_team_name}"}),
    row("GET",    "/api/teams/{team}/",                            200,  200,  200,  404,  403),
    row("PATCH",  "/api/teams/{team}/",                            405,  405,  405,  405,  403, body={"name": "x"}),
    row("DELETE", "/api/teams/{team}/",                            405,  405,  405,  405,  403),
    row("POST",   "/api/teams/{team}/members/",                    201,  403,  403,  404,  403,
        body={"username": "{teamless_user}", "role": "viewer"}),            # add
    row("POST",   "/api/teams/{team}/members/",                    201,  403,  403,  404,  403,
        body={"username": "{viewer_to_promote}", "role": "editor"}),       # change a role
    row("DELETE", "/api/teams/{team}/members/{member_to_remove}/", 204,  403,  403,  404,  403),
    # --- tokens and the catalog: anyone signed in (a token needs the password, not a session)
    row("POST",   "/api/token/",                                   200,  200,  200,  200,  400,
        body={"username": "{me}", "password": people.PASSWORD}),
    row("GET",    "/api/presets/",                                 200,  200,  200,  200,  403),
    row("GET",    "/api/spec-schema/",                             200,  200,  200,  200,  403),
    row("GET",    "/api/criterion-kinds/",                         200,  200,  200,  200,  403),
    row("GET",    "/api/schema/",                                  200,  200,  200,  200,  200),
    row("GET",    "/api/fleet/",                                   200,  200,  200,  200,  403),
    row("GET",    "/api/fleet/quotas/",                            200,  200,  200,  200,  403),  # each their own teams'
    # --- datasets
    row("GET",    "/api/datasets/",                                200,  200,  200,  200,  403),
    row("POST",   "/api/datasets/",                                201,  201,  403,  404,  403,
        body={"team": "{team}", "name": "again", "path": "{dataset_path}"}),
    row("GET",    "/api/datasets/{dataset}/",                      200,  200,  200,  404,  403),
    row("PUT",    "/api/datasets/{dataset}/",                      200,  200,  403,  404,  403,
        body={"team": "{team}", "name": "renamed", "prompt_field": "prompt"}),
    row("PATCH",  "/api/datasets/{dataset}/",                      200,  200,  403,  404,  403, body={"name": "renamed"}),
    row("DELETE", "/api/datasets/{fresh_dataset}/",                204,  204,  403,  404,  403),
    row("GET",    "/api/datasets/{dataset}/preview/",              200,  200,  200,  404,  403),
    # --- rubrics: any member may try the saved rubric; an unsaved one may hold code, so editors only
    row("GET",    "/api/rubrics/",                                 200,  200,  200,  200,  403),
    row("POST",   "/api/rubrics/",                                 201,  201,  403,  404,  403,
        body={"team": "{team}", "name": "made", "spec": RUBRIC}),
    row("GET",    "/api/rubrics/{rubric}/",                        200,  200,  200,  404,  403),
    row("PUT",    "/api/rubrics/{rubric}/",                        200,  200,  403,  404,  403,
        body={"team": "{team}", "name": "renamed", "spec": RUBRIC}),
    row("PATCH",  "/api/rubrics/{rubric}/",                        200,  200,  403,  404,  403, body={"name": "renamed"}),
    row("DELETE", "/api/rubrics/{fresh_rubric}/",                  204,  204,  403,  404,  403),
    row("POST",   "/api/rubrics/{rubric}/try/",                    200,  200,  200,  404,  403, body={"pairs": PAIRS}),
    row("POST",   "/api/rubrics/{rubric}/try/",                    200,  200,  403,  404,  403,
        body={"pairs": PAIRS, "spec": OTHER_RUBRIC}),                      # an unsaved rubric
    # --- environments: like rubrics (an unsaved config may hold tool code, so editors only)
    row("GET",    "/api/environment-kinds/",                       200,  200,  200,  200,  403),
    row("POST",   "/api/environment-kinds/tools/system-prompt/",   200,  200,  200,  200,  403,
        body={"tools": [{"kind": "calculator"}]}),                          # runs nothing, reads no team object
    row("GET",    "/api/environments/",                            200,  200,  200,  200,  403),
    row("POST",   "/api/environments/",                            201,  201,  403,  404,  403,
        body={"team": "{team}", "name": "made", "config": ENVIRONMENT}),
    row("GET",    "/api/environments/{environment}/",              200,  200,  200,  404,  403),
    row("PUT",    "/api/environments/{environment}/",              200,  200,  403,  404,  403,
        body={"team": "{team}", "name": "renamed", "config": ENVIRONMENT}),
    row("PATCH",  "/api/environments/{environment}/",              200,  200,  403,  404,  403, body={"name": "renamed"}),
    row("DELETE", "/api/environments/{fresh_environment}/",        204,  204,  403,  404,  403),
    row("GET",    "/api/environments/{environment}/versions/",     200,  200,  200,  404,  403),
    row("POST",   "/api/environments/{environment}/try/",          200,  200,  200,  404,  403, body=TRY_ROWS),
    row("POST",   "/api/environments/{environment}/try/",          200,  200,  403,  404,  403,
        body={**TRY_ROWS, "config": {**ENVIRONMENT, "max_turns": 2}}),     # an unsaved environment
    # --- experiments
    row("GET",    "/api/experiments/",                             200,  200,  200,  200,  403),
    row("POST",   "/api/experiments/",                             201,  201,  403,  404,  403, body=EXPERIMENT),
    row("GET",    "/api/experiments/{experiment}/",                200,  200,  200,  404,  403),
    row("PUT",    "/api/experiments/{experiment}/",                200,  200,  403,  404,  403,
        body={**EXPERIMENT, "name": "renamed"}),
    row("PATCH",  "/api/experiments/{experiment}/",                200,  200,  403,  404,  403, body={"name": "renamed"}),
    row("DELETE", "/api/experiments/{fresh_experiment}/",          204,  204,  403,  404,  403),
    row("POST",   "/api/experiments/{experiment}/launch/",         201,  201,  403,  404,  403, body={}),
    row("POST",   "/api/experiments/{experiment}/clone/",          201,  201,  403,  404,  403, body={"name": "copy"}),
    # --- runs: made by launch, never created, edited or deleted directly
    row("GET",    "/api/runs/",                                    200,  200,  200,  200,  403),
    row("POST",   "/api/runs/",                                    405,  405,  405,  405,  403, body={}),
    row("GET",    "/api/runs/{run}/",                              200,  200,  200,  404,  403, guest=403),
    row("PATCH",  "/api/runs/{run}/",                              405,  405,  405,  405,  403, body={"name": "x"}),
    row("DELETE", "/api/runs/{run}/",                              405,  405,  405,  405,  403),
    row("POST",   "/api/runs/{queued_run}/cancel/",                200,  200,  403,  404,  403),
    row("POST",   "/api/runs/{finished_run}/resume/",              201,  201,  403,  404,  403),
    row("POST",   "/api/runs/{finished_run}/evaluate/",            201,  201,  403,  404,  403),
    row("POST",   "/api/runs/{run}/clone/",                        201,  201,  403,  404,  403, guest=403, body={}),
    row("POST",   "/api/runs/{finished_run}/rerun/",               409,  409,  403,  404,  403),  # no provenance
    # recorded (it never ran on a worker): refused after the role; tests/studio/runs/test_provenance re-runs one
    row("GET",    "/api/runs/{run}/exports/",                      200,  200,  200,  404,  403, guest=403),
    row("GET",    "/api/runs/{run}/export/{export_target}/",       200,  200,  200,  404,  403, guest=403),  # trl
    row("GET",    "/api/runs/{run}/export/verl/",                  200,  200,  200,  404,  403, guest=403),
    row("GET",    "/api/runs/{run}/report/",                       200,  200,  200,  404,  403, guest=403),
    row("GET",    "/api/runs/{run}/events/",                       200,  200,  200,  404,  403, guest=403),
    row("GET",    "/api/runs/{run}/rollouts/",                     200,  200,  200,  404,  403, guest=200),
    row("GET",    "/api/runs/{run}/rollouts/{rollout}/",           200,  200,  200,  404,  403, guest=200),
    row("GET",    "/api/runs/{run}/rollouts/{rollout}/text/?field=prompt", 200, 200, 200, 404, 403, guest=200),
    row("GET",    "/api/runs/{run}/metrics/",                      200,  200,  200,  404,  403, guest=200),
    row("GET",    "/api/runs/{run}/prompts/",                      200,  200,  200,  404,  403, guest=200),
    row("GET",    "/api/runs/{run}/prompts/{prompt}/",               200,  200,  200,  404,  403, guest=200),
    row("GET",    "/api/compare/?runs={run}",                      200,  200,  200,  404,  403, guest=403),
    # the runs table's seed groups and a metric's band over several runs: what members see; any run not the
    # user's to see makes the band 404
    row("GET",    "/api/runs/groups/",                             200,  200,  200,  200,  403),
    row("GET",    "/api/runs/band/?ids={run}&key=reward/mean",     200,  200,  200,  404,  403, guest=403),
    # tags: owners and editors set them
    row("POST",   "/api/runs/{run}/tags/",                         200,  200,  403,  404,  403, guest=403,
        body={"tags": ["baseline"]}),
    # --- notes: members read; owners and editors write; the author or an owner deletes
    row("GET",    "/api/runs/{run}/notes/",                        200,  200,  200,  404,  403, guest=200),
    row("POST",   "/api/runs/{run}/notes/",                        201,  201,  403,  404,  403, guest=403,
        body={"text": "reward hacking?"}),
    row("DELETE", "/api/notes/{bobs_note}/",                       204,  204,  403,  404,  403),
    row("DELETE", "/api/notes/{alices_note}/",                     204,  403,  403,  404,  403),
    # --- share links: owners and editors
    row("GET",    "/api/runs/{run}/share-links/",                  200,  200,  403,  404,  403, guest=403),
    row("POST",   "/api/runs/{run}/share-links/",                  201,  201,  403,  404,  403, guest=403,
        body={"label": "for a reviewer"}),
    row("POST",   "/api/share-links/{fresh_link}/revoke/",         200,  200,  403,  404,  403),
    # --- runs trained elsewhere (studio.ingest): owners and editors make them and their run tokens; a batch is
    # written with a run token only, so every user's credentials get 401 (tests/studio/ingest tests the tokens)
    row("POST",   "/api/ingest/runs/",                             201,  201,  403,  404,  403,
        body={"team": "{team}", "name": "from trl", "source": "trl"}),
    row("POST",   "/api/ingest/runs/{ingested_run}/tokens/",       201,  201,  403,  404,  403),
    row("POST",   "/api/ingest/tokens/{fresh_run_token}/revoke/",  200,  200,  403,  404,  403),
    row("POST",   "/api/ingest/runs/{ingested_run}/batches/",      401,  401,  401,  401,  401,
        body={"items": [{"kind": "log", "lines": ["hello"]}]}),
    row("POST",   "/api/ingest/verl/",                             400,  400,  403,  404,  403,
        body={"team": "{team}", "name": "verl"}),                          # no files: refused after the role
    # --- a team's usage (studio.runs.usage_views): members of any role; a share link opens none of it
    row("GET",    "/api/teams/{team}/usage/",                      200,  200,  200,  404,  403, guest=403),
    row("GET",    "/api/experiments/{experiment}/estimate/",       200,  200,  200,  404,  403, guest=403),
    # --- experiment trackers: members read (secrets by name and kind, never values); owners set the
    #     team's secrets and default mirror settings; owners and editors set an experiment's
    row("GET",    "/api/teams/{team}/tracker-secrets/",            200,  200,  200,  404,  403),
    row("POST",   "/api/teams/{team}/tracker-secrets/",            201,  403,  403,  404,  403,
        body={"name": "{fresh_secret_name}", "kind": "wandb", "value": "a-key"}),
    row("DELETE", "/api/teams/{team}/tracker-secrets/{fresh_secret}/", 204, 403, 403, 404, 403),
    row("GET",    "/api/teams/{team}/mirror-settings/",            200,  200,  200,  404,  403),
    row("PUT",    "/api/teams/{team}/mirror-settings/",            200,  403,  403,  404,  403, body={"rollouts_per_step": 4}),
    row("GET",    "/api/experiments/{experiment}/mirror-settings/", 200, 200,  200,  404,  403),
    row("PUT",    "/api/experiments/{experiment}/mirror-settings/", 200, 200,  403,  404,  403, body={"inherit": True}),
    row("GET",    "/api/runs/{run}/mirrors/",                      200,  200,  200,  404,  403, guest=403),
    # --- evaluation suites (studio.evaluations): like experiments; a suite run is made by a launch
    row("GET",    "/api/suites/",                                  200,  200,  200,  200,  403),
    row("POST",   "/api/suites/",                                  201,  201,  403,  404,  403, body=SUITE),
    row("GET",    "/api/suites/{suite}/",                          200,  200,  200,  404,  403),
    row("PUT",    "/api/suites/{suite}/",                          200,  200,  403,  404,  403, body={**SUITE, "name": "renamed"}),
    row("PATCH",  "/api/suites/{suite}/",                          200,  200,  403,  404,  403, body={"name": "renamed"}),
    row("DELETE", "/api/suites/{fresh_suite}/",                    204,  204,  403,  404,  403),
    row("POST",   "/api/suites/{suite}/launch/",                   201,  201,  403,  404,  403,
        body={"base_models": ["/models/tiny"]}),
    row("GET",    "/api/suite-runs/",                              200,  200,  200,  200,  403),
    row("GET",    "/api/suite-runs/{suite_run}/",                  200,  200,  200,  404,  403),
    row("POST",   "/api/suite-runs/{suite_run}/cancel/",           200,  200,  403,  404,  403),
    row("GET",    "/api/training-suites/",                         200,  200,  200,  200,  403),
    row("POST",   "/api/training-suites/",                         201,  201,  403,  404,  403,
        body={"team": "{team}", "experiment": "{fresh_experiment}", "suite": "{suite}", "every_n_checkpoints": 2}),
    row("GET",    "/api/training-suites/{training_suite}/",        200,  200,  200,  404,  403),
    row("PUT",    "/api/training-suites/{training_suite}/",        200,  200,  403,  404,  403,
        body={"team": "{team}", "experiment": "{experiment}", "suite": "{suite}", "every_n_checkpoints": 3}),
    row("PATCH",  "/api/training-suites/{training_suite}/",        200,  200,  403,  404,  403, body={"every_n_checkpoints": 4}),
    row("DELETE", "/api/training-suites/{fresh_training_suite}/",  204,  204,  403,  404,  403),
    # --- sweeps (studio.sweeps): like experiments; the experiment is checked before the body (outsider: 404)
    row("GET",    "/api/sweeps/",                                  200,  200,  200,  200,  403),
    row("POST",   "/api/sweeps/",                                  201,  201,  403,  404,  403, body=SWEEP),
    row("GET",    "/api/sweeps/{sweep}/",                          200,  200,  200,  404,  403),
    row("DELETE", "/api/sweeps/{fresh_sweep}/",                    204,  204,  403,  404,  403),
    row("POST",   "/api/sweeps/{fresh_sweep}/stop/",               200,  200,  403,  404,  403),
    row("GET",    "/api/sweeps/{sweep}/importances/",              200,  200,  200,  404,  403),
    row("POST",   "/api/sweeps/{sweep}/trials/{trial}/experiment/", 201, 201,  403,  404,  403),
]
# fmt: on

PLACEHOLDER = re.compile(r"\{(\w+)\}")
SERIAL = count(1)  # unique names for one-off objects


class StudioCells(StudioTestCase):
    """The named objects a row's `{name}` stands for, made on demand for one cell."""

    def setUp(self) -> None:
        super().setUp()
        self.run = self.make_run(state="running")
        PromptStat.objects.create(run=self.run, prompt_id="p0", draws=1, alpha=2.0, beta=1.0, pass_rate=2 / 3,
                                  pass_rate_std=0.24, last_step=1, status="solved", history=[[1, 1, 1]])  # fmt: skip
        self.rollout = Rollout.objects.create(run=self.run, step=1, prompt_id="p0", sample_index=0, run_prompt=prompt_of(self.run, "2+2?"),
                                              completion="4", preview="4", reward=1.0)  # fmt: skip
        self.guest_link = ShareLink.objects.create(run=self.run, created_by=self.alice)
        self.environment = Environment.objects.create(team=self.team, name="countdown", config=ENVIRONMENT)
        self.environment.record_version(self.alice)

    def person(self, role: str):
        return getattr(self, USERS[role]) if role in USERS else None

    def fill(self, row: Row, role: str) -> tuple[str, Any]:
        """The row's url and body with each `{name}` made for this cell (each name once)."""
        made: dict[str, Any] = {}

        def value(name: str) -> Any:
            if name not in made:
                made[name] = getattr(self, f"cell_{name}")(role)
            return made[name]

        def fill_in(template: Any) -> Any:
            if isinstance(template, dict):
                return {k: fill_in(v) for k, v in template.items()}
            if isinstance(template, list):
                return [fill_in(v) for v in template]
            if isinstance(template, str):
                whole = PLACEHOLDER.fullmatch(template)
                if whole:  # "{team}" stays an int in a JSON body
                    return value(whole.group(1))
                return PLACEHOLDER.sub(lambda m: str(value(m.group(1))), template)
            return template

        return fill_in(row.url), fill_in(row.body)

    def request(self, client: APIClient, method: str, url: str, body: Any):
        if body is None:
            return client.generic(method, url)
        return getattr(client, method.lower())(url, body, format="json")

    # Shared objects: reads, and changes that leave them usable by the next cell.
    def cell_team(self, role):
        return self.team.pk

    def cell_dataset(self, role):
        return self.dataset.pk

    def cell_dataset_path(self, role):
        return self.dataset.path

    def cell_rubric(self, role):
        return self.rubric.pk

    def cell_environment(self, role):
        return self.environment.pk

    def cell_experiment(self, role):
        return self.experiment.pk

    def cell_run(self, role):
        return self.run.pk

    def cell_rollout(self, role):
        return self.rollout.pk

    def cell_prompt(self, role):
        return "p0"  # the row id of the run's one prompt statistic

    def cell_fresh_team_name(self, role):
        return f"team {next(SERIAL)}"  # team names are unique

    def cell_me(self, role):
        return USERS.get(role, "")

    # One-off objects: a new one for every cell, because the action changes or deletes it.
    def cell_fresh_dataset(self, role):
        return self.make_dataset(name=f"fresh-{next(SERIAL)}.jsonl").pk

    def cell_fresh_rubric(self, role):
        return Rubric.objects.create(team=self.team, name=f"fresh {role}", spec=RUBRIC).pk

    def cell_fresh_environment(self, role):
        return Environment.objects.create(team=self.team, name=f"fresh {role}", config=ENVIRONMENT).pk

    def cell_fresh_experiment(self, role):
        return Experiment.objects.create(team=self.team, name=f"fresh {role}", dataset=self.dataset, rubric=self.rubric,
                                         model_path="/models/tiny", config={}).pk  # fmt: skip

    def cell_export_target(self, role):
        return "trl"

    def cell_suite(self, role):
        tasks = [{"name": "qa", "dataset": self.dataset.pk, "rubric": self.rubric.pk}]
        return Suite.objects.get_or_create(team=self.team, name="core", defaults={"tasks": tasks})[0].pk

    def cell_fresh_suite(self, role):
        return Suite.objects.create(team=self.team, name=f"fresh {role}", tasks=[]).pk

    def cell_suite_run(self, role):
        suite_run = SuiteRun.objects.create(team=self.team, name="core #1", spec={})
        SuiteResult.objects.create(suite_run=suite_run, run=self.make_run(state="queued", kind="eval"), model_index=0,
                                   model_label="base", task_index=0, task="qa", k=4)  # fmt: skip
        return suite_run.pk

    def cell_training_suite(self, role):
        return TrainingSuite.objects.get_or_create(team=self.team, experiment=self.experiment,
                                                   defaults={"suite_id": self.cell_suite(role)})[0].pk  # fmt: skip

    def cell_fresh_training_suite(self, role):
        experiment = self.cell_fresh_experiment(role)
        return TrainingSuite.objects.create(team=self.team, experiment_id=experiment, suite_id=self.cell_suite(role)).pk

    # A sweep's rows (no study yet: its driver makes that; nothing here reaches Optuna) and a completed trial.
    def _new_sweep(self, name: str) -> Sweep:
        return Sweep.objects.create(team=self.team, experiment=self.experiment, name=name, created_by=self.alice,
                                    parameters=SWEEP["parameters"], study_name=f"matrix-{next(SERIAL)}")  # fmt: skip

    def cell_sweep(self, role):
        if not hasattr(self, "sweep"):
            self.sweep = self._new_sweep("lr")
        return self.sweep.pk

    def cell_fresh_sweep(self, role):
        return self._new_sweep(f"fresh {role}").pk

    def cell_trial(self, role):
        Trial.objects.get_or_create(sweep_id=self.cell_sweep(role), number=0,
                                    defaults={"values": {"optim.lr": 1e-4}, "state": T_COMPLETE, "objective": 0.5})  # fmt: skip
        return 0

    def cell_queued_run(self, role):
        return self.make_run(state="queued").pk

    def cell_finished_run(self, role):
        run = self.make_run(state="succeeded")
        folder = model_folder(self.data_dir / "runs" / str(run.pk) / "step-3")
        Checkpoint.objects.create(run=run, step=3, path=str(folder))  # before its last step: resumable
        return run.pk

    def cell_fresh_secret_name(self, role):
        return f"secret-{next(SERIAL)}"

    def cell_fresh_secret(self, role):
        return tracking_services.set_secret(self.team, f"secret-{next(SERIAL)}", "wandb", "a-key").name

    def cell_ingested_run(self, role):
        if not hasattr(self, "ingested_run"):
            self.ingested_run = ingest_services.create_run(self.team, self.alice, name="from trl", source="trl")[0]
        return self.ingested_run.pk

    def cell_fresh_run_token(self, role):
        return RunToken.issue(Run.objects.get(pk=self.cell_ingested_run(role)), self.alice)[0].pk

    def cell_fresh_link(self, role):
        return ShareLink.objects.create(run=self.run, label=f"for {role}", created_by=self.bob).pk

    def cell_bobs_note(self, role):
        return Note.objects.create(run=self.run, author=self.bob, text=f"bob's note ({role})").pk

    def cell_alices_note(self, role):
        return Note.objects.create(run=self.run, author=self.alice, text=f"alice's note ({role})").pk

    def _new_user(self, role):
        return get_user_model().objects.create_user(f"dave-{next(SERIAL)}", password="password")

    def cell_teamless_user(self, role):
        return self._new_user(role).username

    def cell_viewer_to_promote(self, role):
        user = self._new_user(role)
        self.team.add_member(user, VIEWER)
        return user.username

    def cell_member_to_remove(self, role):
        user = self._new_user(role)
        self.team.add_member(user, VIEWER)
        return user.pk


# What "try" answers when scoring is allowed: scoring itself needs a worker (test_end_to_end.py has one).
SCORED = {"results": []}
TRIED = {"episodes": []}


class PermissionMatrixTest(StudioCells):
    def check_row(self, row: Row, role: str, client: APIClient) -> None:
        url, body = self.fill(row, role)
        with (
            mock.patch("studio.rubrics.api.try_rubric", return_value=SCORED) as scored,
            mock.patch("studio.environments.api.trying.try_environment", return_value=TRIED) as tried,
        ):
            response = self.request(client, row.method, url, body)
        self.assertEqual(response.status_code, row.expect[role], response.content[:500])
        if "/try/" in url and response.status_code != 200:
            scored.assert_not_called()  # refused before anything reaches a worker
            tried.assert_not_called()

    def test_every_role_gets_the_status_the_policy_gives_it(self):
        for row in API_POLICY:
            for role in ROLES:
                with self.subTest(endpoint=str(row), role=role):
                    client = APIClient()
                    if self.person(role) is not None:
                        client.force_authenticate(self.person(role))
                    self.check_row(row, role, client)

    def test_an_api_token_gets_the_same_answers_as_a_session(self):
        for row in API_POLICY:
            for role in USERS:
                with self.subTest(endpoint=str(row), role=role):
                    client = APIClient()
                    token = Token.objects.get_or_create(user=self.person(role))[0]
                    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
                    self.check_row(row, role, client)

    def test_a_live_share_link_opens_the_shared_runs_reads_and_nothing_else(self):
        for row in (r for r in API_POLICY if r.guest is not None):
            with self.subTest(endpoint=str(row)):
                url, body = self.fill(row, "anonymous")
                url += ("&" if "?" in url else "?") + f"share={self.guest_link.token}"
                response = self.request(APIClient(), row.method, url, body)
                self.assertEqual(response.status_code, row.guest, response.content[:500])

    def test_a_revoked_share_link_opens_nothing(self):
        self.guest_link.revoke()
        for row in (r for r in API_POLICY if r.guest == 200):
            with self.subTest(endpoint=str(row)):
                url, _ = self.fill(row, "anonymous")
                response = APIClient().get(url + ("&" if "?" in url else "?") + f"share={self.guest_link.token}")
                self.assertEqual(response.status_code, 404)

    def test_the_fleet_is_shown_to_members_of_any_team_only(self):
        loner = get_user_model().objects.create_user("loner", password="password")  # signed in, in no team
        self.assertEqual(self.client_for(loner).get("/api/fleet/").status_code, 403)

    def test_the_matrix_walks_every_operation_of_the_api(self):
        """A new endpoint or method must get a row here: the OpenAPI schema lists every operation."""
        paths = self.client_for(self.alice).get("/api/schema/?format=json").json()["paths"]
        operations = {(re.sub(r"\{\w+\}", "{}", path), method.upper()) for path, ops in paths.items() for method in ops}
        walked = {(re.sub(r"\{\w+\}", "{}", row.url.split("?")[0]), row.method) for row in API_POLICY}
        self.assertGreater(len(operations), 40)
        self.assertEqual(operations - walked, set())


# --- the websocket ---------------------------------------------------------------------

OPEN, DENIED, REFUSED = "hello", 4403, "refused at the handshake"


@dataclass(frozen=True)
class Socket:
    """How a client comes to /ws/runs/<id>/: who (a role, or None), by what, to which run."""

    who: str | None = None
    via: str = "session"  # session cookie | token in the query | token in the Authorization header
    share: str | None = None  # "live" | "revoked" | "other run": a share link in ?share=
    run: str = "shared"  # "shared" | "missing" (a run id that does not exist)
    origin: bytes = b"http://localhost"


WS_POLICY = {
    "owner (session)":                           (Socket("owner"), OPEN),
    "editor (session)":                          (Socket("editor"), OPEN),
    "viewer (session)":                          (Socket("viewer"), OPEN),
    "outsider (session)":                        (Socket("outsider"), DENIED),
    "anonymous":                                 (Socket(), DENIED),
    "owner (token in the query)":                (Socket("owner", via="token"), OPEN),
    "viewer (token in the header)":              (Socket("viewer", via="header"), OPEN),
    "outsider (token)":                          (Socket("outsider", via="token"), DENIED),
    "unknown token":                             (Socket(via="bad token"), DENIED),
    "share link (anonymous)":                    (Socket(share="live"), OPEN),
    "share link held by an outsider":            (Socket("outsider", share="live"), OPEN),
    "revoked share link":                        (Socket(share="revoked"), DENIED),
    "share link to another run":                 (Socket(share="other run"), DENIED),
    "owner, a run that does not exist":          (Socket("owner", run="missing"), DENIED),
    "owner (session) from another site's page":  (Socket("owner", origin=b"https://evil.example"), REFUSED),
}  # fmt: skip


@database_sync_to_async
def socket_world() -> dict[str, Any]:
    """alice owns the run's team, bob edits, carol views; charlie owns a team of his own."""
    named = people.everyone()
    by_role = {role: named[name] for role, name in USERS.items()}
    team = Team.objects.get(name=people.TEAM)
    run = Run.objects.create(team=team, name="shared", spec={}, state="running")
    other_run = Run.objects.create(team=team, name="not shared", spec={}, state="running")
    events.record(run.pk, [("metrics", 1, {"values": {"reward/mean": 0.5}})])
    revoked = ShareLink.objects.create(run=run, created_by=by_role["owner"])
    revoked.revoke()
    links = {"live": ShareLink.objects.create(run=run, created_by=by_role["owner"]).token, "revoked": revoked.token,
             "other run": ShareLink.objects.create(run=other_run, created_by=by_role["owner"]).token}  # fmt: skip
    return {"people": by_role, "run": run, "links": links}


@database_sync_to_async
def session_cookie(user) -> bytes:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_socket(how: Socket, world: dict[str, Any]) -> WebsocketCommunicator:
    run_id = world["run"].pk + (1000 if how.run == "missing" else 0)
    query, headers = [], [(b"origin", how.origin)]
    user = world["people"].get(how.who)
    if user is not None and how.via == "session":
        headers.append((b"cookie", await session_cookie(user)))
    elif user is not None:
        key = (await database_sync_to_async(Token.objects.get_or_create)(user=user))[0].key
        if how.via == "header":
            headers.append((b"authorization", f"Token {key}".encode()))
        else:
            query.append(f"token={key}")
    elif how.via == "bad token":
        query.append("token=not-a-token")
    if how.share:
        query.append(f"share={world['links'][how.share]}")
    path = f"/ws/runs/{run_id}/" + (f"?{'&'.join(query)}" if query else "")
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(WS_POLICY))
async def test_the_run_socket_opens_only_for_those_the_policy_lets_in(case):
    how, expected = WS_POLICY[case]
    world = await socket_world()
    socket = await open_socket(how, world)
    connected, _ = await socket.connect(timeout=5)
    if expected == REFUSED:
        assert not connected
        return
    assert connected
    if expected == OPEN:
        hello = await socket.receive_json_from(timeout=5)
        assert (hello["kind"], hello["run"]["id"]) == ("hello", world["run"].pk)
        assert (await socket.receive_json_from(timeout=5))["seq"] == 1  # then the stored events
        await socket.disconnect()
    else:
        assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": expected}
