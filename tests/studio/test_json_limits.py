"""JSON from a request is read within limits (studio.lib.json_limits): a body nested past
STUDIO_JSON_MAX_DEPTH, larger than STUDIO_JSON_MAX_MB, or holding NaN / Infinity / 1e999 answers 400
naming the limit, never a 500, and the next request is answered as usual. Through the API (the
sign-in token endpoint that needs no login, a normal endpoint, ingest), a page form, a form body's
JSON field, and a run page's websocket."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from studio.lib import json_limits
from studio.lib.fields import JSONField, finite_json
from studio.rubrics.models import Rubric
from studio.runs.models import Rollout, Run
from tests.studio import people
from tests.studio.base import RUBRIC, StudioTestCase
from tests.studio.people import PASSWORD

DEEP = "[" * 100_000 + "]" * 100_000  # Python's parser recursed once per level: RecursionError, a 500


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def post_json(client: APIClient, url: str, text: str):
    return client.generic("POST", url, text, content_type="application/json")


# --- the reader itself ---------------------------------------------------------------------------


def test_it_reads_json_up_to_the_depth_limit_and_refuses_one_level_more(settings):
    settings.JSON_MAX_DEPTH = 64
    assert json_limits.loads(deep(64)) is not None
    with pytest.raises(json_limits.JSONLimitError, match="deeper than 64 levels") as refused:
        json_limits.loads(deep(65))
    assert refused.value.limit == "depth"


def test_brackets_inside_strings_do_not_count_as_depth(settings):
    settings.JSON_MAX_DEPTH = 8
    text = json.dumps({"a": "[[[[[[[[[[{{{{{{{{{", "b": ['\\"[[[[[[[[[[[[', "]]]]]]]]]]"]})  # escaped quotes too
    assert json_limits.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"x": -Infinity}', '{"lr": 1e999}', "[-1e400]"])
def test_numbers_json_cannot_store_are_refused(text):
    with pytest.raises(json_limits.JSONLimitError) as refused:
        json_limits.loads(text)
    assert refused.value.limit == "number"


def test_a_text_larger_than_the_size_limit_is_refused_before_parsing():
    with pytest.raises(json_limits.JSONLimitError, match="larger than the limit of 100 bytes") as refused:
        json_limits.loads(json.dumps(["x" * 200]), size=100)
    assert refused.value.limit == "size"
    assert json_limits.loads(json.dumps(["x" * 50]), size=100) == ["x" * 50]


def test_finite_json_names_where_a_non_finite_number_is():
    assert finite_json({"a": [1.0, {"b": 2}]}) == {"a": [1.0, {"b": 2}]}
    with pytest.raises(Exception, match=r"optim\.betas\[1\] is not a finite number"):
        finite_json({"optim": {"betas": [0.9, float("inf")]}})
    with pytest.raises(Exception, match="lr is not a finite number"):
        JSONField().run_validation({"lr": float("nan")})  # a value built in Python, not parsed from a body


# --- through the API ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_deep_body_on_the_token_endpoint_is_a_400_naming_the_limit_and_sign_in_still_works(alice):
    client = APIClient()
    answer = post_json(client, "/api/token/", DEEP)
    assert answer.status_code == 400, answer.content
    assert answer.json()["limit"] == "depth"
    assert "STUDIO_JSON_MAX_DEPTH" in answer.json()["detail"]
    again = post_json(client, "/api/token/", json.dumps({"username": "alice", "password": PASSWORD}))
    assert again.status_code == 200, again.content
    assert again.json()["token"] == Token.objects.get(user=alice).key


@pytest.mark.django_db
def test_a_deep_body_on_a_normal_endpoint_is_a_400_and_the_next_request_works(alice):
    client = APIClient()
    client.force_authenticate(alice)
    answer = post_json(client, "/api/teams/", json.dumps({"name": "deep", "x": json.loads(deep(50))})[:-1] + DEEP + "}")
    assert (answer.status_code, answer.json()["limit"]) == (400, "depth"), answer.content
    created = post_json(client, "/api/teams/", json.dumps({"name": "next one"}))
    assert created.status_code == 201, created.content


@pytest.mark.django_db
def test_a_body_past_the_size_limit_is_a_400_naming_the_size(alice, settings):
    settings.JSON_MAX_BYTES = 1000
    client = APIClient()
    client.force_authenticate(alice)
    answer = post_json(client, "/api/teams/", json.dumps({"name": "x" * 2000}))
    assert (answer.status_code, answer.json()["limit"]) == (400, "size"), answer.content
    assert "STUDIO_JSON_MAX_MB" in answer.json()["detail"]
    assert post_json(client, "/api/teams/", json.dumps({"name": "small"})).status_code == 201


@pytest.fixture
def ingest_run(team, alice):
    client = APIClient()
    client.force_authenticate(alice)
    answer = client.post("/api/ingest/runs/", {"team": team.pk, "name": "trl"}, format="json")
    assert answer.status_code == 201, answer.content
    writer = APIClient()
    writer.credentials(HTTP_AUTHORIZATION=f"Bearer {answer.json()['token']}")
    return client, writer, answer.json()["run"]["id"]


@pytest.mark.parametrize("number", ["1e999", "NaN", "-Infinity"])
def test_a_non_finite_number_in_ingest_settings_is_a_400_and_the_next_batch_is_stored(ingest_run, team, number):
    client, writer, run_id = ingest_run
    new_run = json.dumps({"team": team.pk, "name": "x", "settings": {"lr": "LR"}}).replace('"LR"', number)
    answer = post_json(client, "/api/ingest/runs/", new_run)
    assert (answer.status_code, answer.json()["limit"]) == (400, "number"), answer.content
    batch = json.dumps({"items": [{"kind": "settings", "settings": {"optim": {"lr": "LR"}}}]}).replace('"LR"', number)
    answer = post_json(writer, f"/api/ingest/runs/{run_id}/batches/", batch)
    assert (answer.status_code, answer.json()["limit"]) == (400, "number"), answer.content
    stored = post_json(writer, f"/api/ingest/runs/{run_id}/batches/",
                       json.dumps({"items": [{"kind": "settings", "settings": {"optim": {"lr": 1e-6}}}]}))  # fmt: skip
    assert stored.status_code == 200, stored.content
    assert client.get(f"/api/runs/{run_id}/").json()["spec"]["settings"] == {"optim": {"lr": 1e-6}}


def test_a_non_finite_tool_call_argument_is_refused_where_it_is_and_nothing_is_stored(ingest_run):
    _, writer, run_id = ingest_run
    episode = {"prompt": "2+2?", "reward": 1.0, "turns": [
        {"text": "calc", "tool_calls": [{"name": "calculator", "arguments": {"x": 1e999}}]}]}  # fmt: skip
    # json.dumps writes Infinity, as a client built on Python's json would send it.
    body = json.dumps({"items": [{"kind": "episodes", "step": 1, "episodes": [episode]}]})
    answer = post_json(writer, f"/api/ingest/runs/{run_id}/batches/", body)
    assert (answer.status_code, answer.json()["limit"]) == (400, "number"), answer.content
    assert not Rollout.objects.filter(run_id=run_id).exists()


def test_ingest_validation_refuses_non_finite_settings_and_arguments_built_in_python():
    """The parser refuses them in a body; a value built in Python (a multipart form, a client library)
    meets the serializers' own check, naming the field."""
    from studio.ingest import items

    settings_item = items.SettingsItem(data={"kind": "settings", "settings": {"lr": float("inf")}})
    assert not settings_item.is_valid()
    assert "lr is not a finite number" in str(settings_item.errors["settings"])
    call = items.ToolCallIn(data={"name": "calculator", "arguments": {"x": [1, float("nan")]}})
    assert not call.is_valid()
    assert "x[1] is not a finite number" in str(call.errors["arguments"])


@pytest.mark.django_db
def test_a_deep_json_field_in_a_form_body_is_refused_naming_the_field(alice, team):
    rubric = Rubric.objects.create(team=team, name="r", spec={"criteria": []}, created_by=alice)
    client = APIClient()
    client.force_authenticate(alice)
    form = {"pairs": "[]", "spec": DEEP}  # DRF parses a form's JSON field itself
    answer = client.post(f"/api/rubrics/{rubric.pk}/try/", form)
    assert answer.status_code == 400, answer.content
    assert "deeper than" in str(answer.json()["spec"])


# --- a page and a websocket ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_deep_extra_fields_text_on_the_rubric_page_try_is_shown_not_a_500(alice, team):
    from studio.rubrics.forms import trial_pairs

    with pytest.raises(ValueError, match="extra fields: not valid JSON .*deeper than"):
        trial_pairs({"completions": "4", "fields": DEEP, "prompt": "2+2?", "answer": ""}, {}, alice)


@database_sync_to_async
def a_run_and_token() -> tuple[int, str]:
    user = people.person("alice")
    run = Run.objects.create(team=people.the_team(), name="r", spec={}, state="running")
    return run.pk, Token.objects.create(user=user).key


@pytest.mark.timeout(60)
@pytest.mark.django_db(transaction=True)
async def test_a_deep_websocket_message_is_answered_with_why_and_the_socket_stays_open():
    from studio.asgi import application

    run_id, token = await a_run_and_token()
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run_id}/?token={token}", headers=[(b"origin", b"http://localhost")]
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(timeout=5))["kind"] == "hello"
    await communicator.send_to(text_data=DEEP)
    answer = await communicator.receive_json_from(timeout=5)
    assert answer["kind"] == "error" and "deeper than" in answer["detail"], answer
    await communicator.send_json_to({"kind": "ping"})
    assert (await communicator.receive_json_from(timeout=5))["kind"] == "pong"
    await communicator.disconnect()


# --- settings a schema validated: the text "inf" reads as a float there ---------------------------------


class ValidatedSettingsTest(StudioTestCase):
    def test_an_experiment_config_whose_text_reads_as_infinity_is_a_400_naming_the_field(self):
        api = self.client_for(self.alice)
        for text in ("inf", "nan", "1e999"):
            config = {"optim": {"total_steps": 5}, "algorithm": {"overlong_penalty_factor": text}}
            answer = api.patch(f"/api/experiments/{self.experiment.pk}/", {"config": config}, format="json")
            self.assertEqual(answer.status_code, 400, answer.content)
            why = str(answer.json()["algorithm.overlong_penalty_factor"])
            self.assertIn("greater than or equal to 0" if text == "nan" else "not a finite number", why)
        self.experiment.refresh_from_db()
        self.assertEqual(self.experiment.config, {"optim": {"total_steps": 5}})  # kept as it was
        self.assertEqual(api.get(f"/api/experiments/{self.experiment.pk}/").status_code, 200)

    def test_a_rubric_whose_pass_threshold_reads_as_infinity_is_a_400_naming_it(self):
        api = self.client_for(self.alice)
        spec = {**RUBRIC, "pass_threshold": "-inf"}
        answer = api.post("/api/rubrics/", {"team": self.team.pk, "name": "w", "spec": spec}, format="json")
        self.assertEqual(answer.status_code, 400, answer.content)
        self.assertIn("not a finite number", answer.json()["spec"]["pass_threshold"])
        self.assertFalse(Rubric.objects.filter(name="w").exists())
