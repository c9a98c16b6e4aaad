"""'Try it' for environments, the studio's side: who may try what, with which model, and how the
episodes come back on the page (the worker's side is test_try_worker.py)."""

from __future__ import annotations

import time
from unittest import mock

from studio.environments import trying
from studio.environments.models import Environment
from studio.runs.models import Checkpoint
from tests.studio.base import StudioTestCase, model_folder
from tests.studio.environment_kind import CONFIG, KIND

ROWS = [{"prompt": "Count down", "answer": "stop"}]
# What the worker answers: one row, one episode of two turns, the first calling a tool.
EPISODE = {
    "messages": [{"role": "user", "content": "Count down"}], "end_reason": "done", "error": None,
    "turns": [
        {"text": '<tool_call>{"name": "calculator", "arguments": {"expression": "3-1"}}</tool_call>', "num_tokens": 9,
         "finish_reason": "stop", "tool_calls": [{"name": "calculator", "arguments": {"expression": "3-1"}, "result": "2",
         "error": None, "seconds": 0.01, "truncated": False}], "observation": [{"role": "tool", "content": "2"}],
         "observation_tokens": 3, "reward": 0.0, "reason": "", "advantage": 0.0, "answered": False},
        {"text": "stop", "num_tokens": 2, "finish_reason": "stop", "tool_calls": [], "observation": [],
         "observation_tokens": 0, "reward": 1.0, "reason": "said the word", "advantage": 0.0, "answered": True},
    ],
}  # fmt: skip
TRIED = {"episodes": [[EPISODE]]}


class TryEnvironmentTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.environment = Environment.objects.create(team=self.team, name="countdown", config=CONFIG)
        self.environment.record_version(self.bob)
        self.url = f"/api/environments/{self.environment.pk}/try/"

    def try_as(self, user, **body):
        payload = {"rows": ROWS, "model": "/models/tiny", **body}
        with mock.patch("studio.environments.api.trying.try_environment", return_value=TRIED) as sent:
            response = self.client_for(user).post(self.url, payload, format="json")
        return response, sent

    def test_a_viewer_tries_the_saved_environment_but_not_an_unsaved_one(self):
        response, sent = self.try_as(self.carol)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(sent.call_args.args[0], self.environment.config)
        self.assertEqual(response.json(), TRIED)
        response, sent = self.try_as(self.carol, config={**CONFIG, "max_turns": 8})
        self.assertEqual(response.status_code, 403)
        sent.assert_not_called()
        response, sent = self.try_as(self.bob, config={**CONFIG, "max_turns": 8})
        self.assertEqual((response.status_code, sent.call_args.args[0]["max_turns"]), (200, 8))

    def test_a_model_inside_the_data_folder_must_be_one_of_the_teams_checkpoints(self):
        foreign = model_folder(self.data_dir / "runs" / "999" / "step-1")
        response, sent = self.try_as(self.bob, model=str(foreign))
        self.assertEqual(response.status_code, 400)
        self.assertIn("inside the studio's data folder", response.json()["model"])
        sent.assert_not_called()

    def test_a_checkpoint_is_tried_on_top_of_its_runs_model_and_must_be_the_teams(self):
        run = self.make_run(state="succeeded")
        checkpoint = Checkpoint.objects.create(run=run, step=3, path=str(self.data_dir / "runs" / str(run.pk) / "s3"))
        response, sent = self.try_as(self.bob, model="", checkpoint=checkpoint.pk)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(sent.call_args.args[1], {"model_path": "/models/tiny", "checkpoint": checkpoint.path})
        other = self.make_run(state="succeeded")
        other.team = self.other_team
        other.save()
        theirs = Checkpoint.objects.create(run=other, step=1, path="/x")
        response, sent = self.try_as(self.bob, model="", checkpoint=theirs.pk)
        self.assertEqual(
            (response.status_code, response.json()), (400, {"checkpoint": "no such checkpoint in this team"})
        )

    def test_too_many_rows_or_a_row_without_a_prompt_is_refused_before_any_worker(self):
        with mock.patch("studio.environments.trying.celery_app.send_task") as send:
            for rows, key in (([{"prompt": "p"}] * 5, "rows"), ([{"answer": "a"}], "rows.0")):
                with self.assertRaises(trying.TryError) as refused:
                    trying.try_environment(CONFIG, {"model_path": "/m", "checkpoint": None}, rows)
                self.assertIn(key, refused.exception.errors)
        send.assert_not_called()

    def test_a_timeout_with_no_worker_says_no_worker_serves_the_queue(self):
        message = trying.timeout_message("PENDING", None, 3)
        self.assertIn("none serving the 'default' queue is running", message)
        running = trying.timeout_message(trying.TRYING_STATE, {"stage": "running episodes"}, 3)
        self.assertTrue(running.startswith("the worker was still running episodes after 3 s"), running)

    def test_a_try_while_a_run_trains_says_so_at_once_and_when_it_times_out(self):
        # Issue 39: a try while a run trained blocked the page for 180 s and gave up, naming neither.
        self.assertEqual(trying.training_note(), "")
        self.make_run("running", name="letters", last_step=3, total_steps=20)
        note = trying.training_note(180)
        self.assertTrue(note.startswith("Run #"), note)
        self.assertIn("'letters' (step 3 of 20) is training now", note)
        self.assertIn("a try gives up after 180 s", note)
        timed_out = trying.timeout_message(trying.TRYING_STATE, {"stage": "running episodes"}, 180)
        self.assertIn("'letters' (step 3 of 20) is training now", timed_out)
        self.client.force_login(self.bob)
        page = self.client.get(f"/environments/{self.environment.pk}/").content.decode()
        self.assertIn("data-try-training", page)
        self.assertIn("(step 3 of 20) is training now", page)


class EnvironmentPageTest(StudioTestCase):
    def form(self, **fields):
        body = {"team": self.team.pk, "name": "countdown", "config.kind": KIND, "shown_kind": KIND,
                "config.params.word": "stop", "config.params.start": "3", "config.max_turns": "3",
                "config.max_episode_tokens": "1024", "config.max_turn_tokens": "256", "config.tool_timeout_s": "5",
                "config.tool_memory_mb": "512", "config.max_observation_chars": "2000", "action": "save"}  # fmt: skip
        return {**body, **fields}

    def test_the_form_is_drawn_from_the_kinds_params_and_the_limits_schema(self):
        self.client.force_login(self.bob)
        self.assertEqual(self.client.get("/environments/new/").status_code, 200)
        # Choosing a kind redraws the form with that kind's params (the select submits "refresh").
        page = self.client.post("/environments/new/", {"config.kind": KIND, "action": "refresh"}).content.decode()
        self.assertIn('name="config.params.start"', page)
        self.assertIn('max="10"', page)  # CountdownParams.start le=10
        self.assertIn('name="config.max_turns"', page)
        self.assertIn("Model turns per episode", page)  # EnvironmentSpec's help text
        self.assertNotIn('name="config.params"', page)  # drawn as the kind's own fields

    def test_saving_a_valid_form_makes_version_1_and_an_invalid_one_saves_nothing(self):
        self.client.force_login(self.bob)
        response = self.client.post("/environments/new/", self.form(**{"config.params.start": "99"}))
        self.assertEqual(response.status_code, 200)
        page = response.content.decode()
        field = page[page.index('data-field="config.params.start"') :]
        self.assertIn('<small class="error">', field[: field.index("</div>")])  # beside its field
        self.assertFalse(Environment.objects.exists())
        response = self.client.post("/environments/new/", self.form())
        saved = Environment.objects.get()
        self.assertRedirects(response, f"/environments/{saved.pk}/", fetch_redirect_response=False)
        self.assertEqual((saved.version, saved.config["params"]["start"]), (1, 3))

    def test_a_viewer_cannot_save_changes(self):
        environment = Environment.objects.create(team=self.team, name="countdown", config=CONFIG)
        self.client.force_login(self.carol)
        response = self.client.post(f"/environments/{environment.pk}/", self.form(**{"config.max_turns": "9"}))
        self.assertEqual(response.status_code, 403)
        self.assertEqual(Environment.objects.get().config["max_turns"], 3)

    def test_try_it_sends_the_episodes_and_the_page_follows_them_to_each_turn_and_tool_call(self):
        self.client.force_login(self.bob)
        body = self.form(action="try", try_model="/models/tiny", try_prompt="Count down", try_episodes="1")
        with mock.patch("studio.environments.pages.trying.send_try", return_value="task-1") as sent:
            page = self.client.post("/environments/new/", body).content.decode()
        self.assertEqual(sent.call_args.args[2], [{"prompt": "Count down"}])
        self.assertIn('data-try-id="task-1"', page)  # the page answers at once and follows the try
        self.assertIn("js/try_panel.js", page)
        self.assertFalse(Environment.objects.exists())  # trying saves nothing
        with mock.patch("studio.environments.pages.trying.progress", return_value={
                "state": "done", "message": "", "waited_s": 2.0, "episodes": TRIED["episodes"]}):  # fmt: skip
            now = self.client.get("/environments/tries/task-1/").json()
        self.assertEqual(now["state"], "done")
        self.assertEqual(now["html"].count('class="turn"'), 2)
        self.assertEqual(now["html"].count('class="tool-call'), 1)
        self.assertIn("&quot;expression&quot;: &quot;3-1&quot;", now["html"])
        self.assertIn("said the word", now["html"])
        # done: the session forgets it
        self.assertEqual(self.client.get("/environments/tries/task-1/").status_code, 404)

    def test_only_the_session_that_sent_a_try_follows_or_stops_it(self):
        self.client.force_login(self.bob)
        body = self.form(action="try", try_model="/models/tiny", try_prompt="Count down", try_episodes="1")
        with mock.patch("studio.environments.pages.trying.send_try", return_value="task-2"):
            self.client.post("/environments/new/", body)
        other = self.client_class()
        other.force_login(self.alice)
        self.assertEqual(other.get("/environments/tries/task-2/").status_code, 404)
        self.assertEqual(other.post("/environments/tries/task-2/stop").status_code, 404)
        with mock.patch("studio.environments.pages.trying.stop") as stopped:
            self.assertEqual(self.client.post("/environments/tries/task-2/stop").status_code, 200)
        stopped.assert_called_once_with("task-2")

    def test_a_refused_try_says_why_on_the_page_and_sends_nothing(self):
        self.client.force_login(self.bob)
        body = self.form(action="try", try_model="/models/tiny", try_prompt="", try_episodes="1")
        with mock.patch("studio.environments.pages.trying.celery_app.send_task") as send:
            page = self.client.post("/environments/new/", body).content.decode()
        send.assert_not_called()
        self.assertIn("data-try-error", page)
        self.assertNotIn("data-try-id", page)


class TryProgressTest(StudioTestCase):
    """studio.environments.trying.progress on each state of the task (Celery's result, read through a mock:
    the states themselves are Celery's)."""

    def at(self, state: str, info=None, result=None, waited_s: float = 1.0, timeout_s: float = 60.0) -> dict:
        fake = mock.Mock(state=state, info=info, result=result)
        with mock.patch("studio.environments.trying.celery_app.AsyncResult", return_value=fake):
            now = trying.progress("t", time.time() - waited_s, timeout_s)
        now["revoked"] = fake.revoke.called
        return now

    def test_each_state_in_words(self):
        self.assertEqual(self.at("PENDING")["message"], "sent to a worker…")
        waiting = self.at("PENDING", waited_s=12)
        self.assertEqual(waiting["state"], "waiting")
        self.assertIn("none serving the 'default' queue is running", waiting["message"])
        running = self.at(trying.TRYING_STATE, {"stage": "loading the model"})
        self.assertEqual((running["state"], running["message"]), ("running", "loading the model…"))
        done = self.at("SUCCESS", result=TRIED)
        self.assertEqual((done["state"], done["episodes"]), ("done", TRIED["episodes"]))
        refused = self.at("SUCCESS", result={"error": "model_path: not allowed"})
        self.assertEqual((refused["state"], refused["message"]), ("failed", "model_path: not allowed"))
        crashed = self.at("FAILURE", info=RuntimeError("CUDA error"))
        self.assertEqual(crashed["message"], "the episodes failed on the worker: RuntimeError: CUDA error")
        self.assertEqual(self.at("REVOKED")["message"], "stopped before its episodes were done")

    def test_past_the_timeout_it_fails_with_the_reason_and_the_worker_is_asked_to_stop(self):
        late = self.at(trying.TRYING_STATE, {"stage": "running episodes"}, waited_s=61)
        self.assertEqual(late["state"], "failed")
        self.assertTrue(late["message"].startswith("the worker was still running episodes after 60 s"), late)
        self.assertTrue(late["revoked"])
        self.assertFalse(self.at(trying.TRYING_STATE, {"stage": "running episodes"}, waited_s=59)["revoked"])


def test_an_error_about_a_part_of_a_field_shows_beside_that_field():
    from studio.environments.forms import fold_errors

    errors = {"config.params.tools.0": "unknown tool kind 'abacus'", "config.params.tools.1.params": "bad", "name": "x"}
    folded = fold_errors(errors, {"config.params.tools", "config.max_turns"})
    assert folded == {"config.params.tools": "0: unknown tool kind 'abacus' 1.params: bad", "name": "x"}
