"""Team API tokens (the team page that makes and revokes them, hashed keys, scopes) and what they open
before any model runs: /v1/models lists the token's team's models only, errors in the OpenAI shape."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from studio.lib import keys
from studio.runs.models import Checkpoint, Run
from studio.serving import tokens
from studio.serving.models import INFERENCE, MODELS_READ, ApiToken


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


@pytest.fixture
def trained(run):
    run.spec = {"model": {"path": "HuggingFaceTB/SmolLM2-135M-Instruct"}}
    run.save(update_fields=["spec"])
    Checkpoint.objects.create(run=run, step=10, path="/data/runs/1/step-10")
    Checkpoint.objects.create(run=run, step=20, path="/data/runs/1/step-20")
    return run


def test_an_owner_makes_a_token_shown_once_and_only_its_hash_is_kept(team, alice):
    page = signed_in(alice).post(f"/teams/{team.pk}/api-tokens/", {"name": "ci", "scopes": [MODELS_READ, INFERENCE]})
    assert page.status_code == 200
    key = re.search(r"<code data-key>(rs-[^<]+)</code>", page.content.decode())[1]
    token = ApiToken.objects.get(team=team)
    assert token.key_hash == keys.digest(key) and key not in str(token.__dict__)
    assert token.scopes == [INFERENCE, MODELS_READ]
    again = signed_in(alice).get(f"/teams/{team.pk}/api-tokens/").content.decode()
    assert key not in again and token.prefix in again  # never shown again; told apart by its start


def test_a_viewer_sees_the_tokens_but_cannot_make_one_and_an_outsider_gets_404(team, carol, charlie):
    assert signed_in(carol).get(f"/teams/{team.pk}/api-tokens/").status_code == 200
    assert (
        signed_in(carol).post(f"/teams/{team.pk}/api-tokens/", {"name": "x", "scopes": [INFERENCE]}).status_code == 403
    )
    assert signed_in(charlie).get(f"/teams/{team.pk}/api-tokens/").status_code == 404
    assert not ApiToken.objects.exists()


def test_a_token_without_a_name_or_with_an_unknown_scope_is_refused_naming_the_field(team, bob):
    page = signed_in(bob).post(f"/teams/{team.pk}/api-tokens/", {"name": "x", "scopes": ["root"]})
    assert page.status_code == 400 and "scopes: unknown scope &#x27;root&#x27;" in page.content.decode()
    page = signed_in(bob).post(f"/teams/{team.pk}/api-tokens/", {"name": "", "scopes": [INFERENCE]})
    assert page.status_code == 400 and "name:" in page.content.decode()
    assert not ApiToken.objects.exists()


def test_models_lists_the_teams_base_and_checkpoints_and_a_revoked_token_opens_nothing(team, alice, trained):
    token, key = tokens.create(team, "ci", [MODELS_READ])
    answer = Client().get("/v1/models", **bearer(key))
    assert answer.status_code == 200
    names = [m["id"] for m in answer.json()["data"]]
    assert names == [f"run-{trained.pk}/base", f"run-{trained.pk}/step-10", f"run-{trained.pk}/step-20"]
    assert all(m["owned_by"] == team.name and "/data" not in str(m) for m in answer.json()["data"])  # no server paths
    tokens.revoke(token)
    refused = Client().get("/v1/models", **bearer(key))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"


def test_another_teams_token_lists_none_of_it_and_cannot_name_it(team, trained, charlie):
    other = charlie.teams.get()
    _, key = tokens.create(other, "theirs", [MODELS_READ, INFERENCE])
    assert Client().get("/v1/models", **bearer(key)).json()["data"] == []
    answer = Client().post("/v1/chat/completions", {"model": f"run-{trained.pk}/step-10", "messages": [
        {"role": "user", "content": "hi"}]}, content_type="application/json", **bearer(key))  # fmt: skip
    assert answer.status_code == 404
    assert answer.json()["error"]["param"] == "model"


def test_the_scopes_are_checked_before_the_body(team, trained):
    _, key = tokens.create(team, "list", [MODELS_READ])
    answer = Client().post("/v1/completions", "not json", content_type="application/json", **bearer(key))
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "insufficient_scope"
    _, key = tokens.create(team, "gen", [INFERENCE])
    assert Client().get("/v1/models", **bearer(key)).status_code == 403


@pytest.mark.parametrize(("body", "param"), [
    ("[1, 2]", "body"), ('{"messages": []}', "model"), ('{"model": "run-1/step-10", "messages": "hi"}', "messages"),
    ('{"model": "x", "messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
    ('{"model": "x", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "retrieval"}]}', "tools[0]"),
    ('{"model": "x", "messages": [{"role": "user", "content": "hi"}], "seed": 1.5}', "seed"),
    ('{"model": "x", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}', "tool_choice"),
    ('{"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    ("{nope", "body"),
])  # fmt: skip
def test_a_bad_body_is_answered_400_naming_the_field_before_any_model_is_started(team, body, param):
    _, key = tokens.create(team, "gen", [INFERENCE])
    answer = Client().post("/v1/chat/completions", body, content_type="application/json", **bearer(key))
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["param"] == param
    assert answer.json()["error"]["type"] == "invalid_request_error"
    from studio.serving.models import ModelServer

    assert not ModelServer.objects.exists()


def test_a_run_without_a_model_section_lists_nothing(team):
    Run.objects.create(team=team, name="ingested", spec={"model": "not a section"})
    _, key = tokens.create(team, "ci", [MODELS_READ])
    assert Client().get("/v1/models", **bearer(key)).json()["data"] == []


def test_the_teams_page_and_the_run_page_link_to_tokens_and_playground(team, alice, trained):
    assert f'href="/teams/{team.pk}/api-tokens/"' in signed_in(alice).get("/teams/").content.decode()
    assert f'href="/runs/{trained.pk}/playground/"' in signed_in(alice).get(f"/runs/{trained.pk}/").content.decode()


@pytest.mark.parametrize("revoke", ["abc", "99999999999999999999999", "-1", ""])
def test_revoking_a_token_that_is_no_id_of_the_team_is_404_and_revokes_nothing(team, alice, revoke):
    token, _ = tokens.create(team, "ci", [INFERENCE])
    page = signed_in(alice).post(f"/teams/{team.pk}/api-tokens/", {"revoke": revoke})
    assert page.status_code == 404
    token.refresh_from_db()
    assert token.revoked is None
