"""The one path and endpoint policy (trainers.access, bound to the studio in studio.experiments.paths),
through the API, the pages and the worker's tasks: a search tool's documents, files inside a named
folder that link into the data folder, and the endpoints a run may send weights and prompts to.
Each refusal names the field, and the next request (with an allowed value) still works."""

from __future__ import annotations

import json

from django.test import override_settings

from studio.datasets.models import Dataset
from studio.environments.models import Environment
from studio.rubrics.models import Rubric
from studio.runs.models import Run
from tests.studio.base import ROWS, StudioTestCase, model_folder, write_jsonl
from workers.tasks import score_rubric, try_environment

OUTSIDE = "inside the studio's data folder"
PASSWORD = "first-login-PASSWORD-1234"


def search_environment(dataset: str) -> dict:
    tools = [{"kind": "search", "params": {"dataset": dataset}}, {"kind": "calculator"}]
    return {"kind": "tools", "params": {"tools": tools}, "max_turns": 2}


def judge_rubric(**params) -> dict:
    judge = {"model": "judge", "rubric": "Is it right?", **params}
    return {"criteria": [{"name": "judge", "kind": "llm_judge", "weight": 1.0, "params": judge}]}


class PathPolicyTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        # What the attacker is after: the first login's password, readable as rows by any reader.
        self.first_login = write_jsonl(self.data_dir / "first-login.txt", [{"prompt": PASSWORD, "text": PASSWORD}])
        self.theirs = Run.objects.create(team=self.other_team, name="theirs", spec={}, state="succeeded")
        self.their_checkpoint = model_folder(self.data_dir / "runs" / str(self.theirs.pk) / "checkpoints" / "step-1")
        (self.their_checkpoint / "model.safetensors").write_bytes(b"their weights")
        self.documents = write_jsonl(self.tmp / "docs.jsonl", [{"title": "t", "text": "public"}])

    def launch(self, overrides, user=None):
        url = f"/api/experiments/{self.experiment.pk}/launch/"
        return self.client_for(user or self.bob).post(url, {"overrides": overrides}, format="json")

    def linked_folder(self, name: str, links: dict[str, object]) -> object:
        """A real folder under the allowed root whose files are symbolic links to `links`' targets."""
        folder = self.tmp / name
        folder.mkdir()
        for file, target in links.items():
            (folder / file).symlink_to(target)
        return folder

    # ---- the search tool's documents

    def test_an_environment_whose_search_tool_reads_the_data_folder_is_refused_everywhere(self):
        field = "config.params.tools.0.params.dataset"
        client = self.client_for(self.bob)
        for path in (self.first_login, self.data_dir / "secret_key", self.data_dir, "/etc/passwd"):
            with self.subTest(path=str(path)):
                body = {"team": self.team.pk, "name": "leak", "config": search_environment(str(path))}
                response = client.post("/api/environments/", body, format="json")
                self.assertEqual(response.status_code, 400, response.content)
                self.assertIn(field, response.json())
        self.assertIn(OUTSIDE, client.post("/api/environments/", {
            "team": self.team.pk, "name": "leak", "config": search_environment(str(self.first_login))},
            format="json").json()[field][0])  # fmt: skip
        self.assertFalse(Environment.objects.filter(name="leak").exists())
        # The editor page says it beside the form, and saves nothing.
        self.client.force_login(self.bob)
        response = self.client.post("/environments/new/", {
            "team": self.team.pk, "name": "leak-page", "config.kind": "tools", "shown_kind": "tools",
            "config.params.tools": json.dumps([{"kind": "search", "params": {"dataset": str(self.first_login)}}]),
            "config.params.formats": "hermes", "config.params.system_prompt": "s", "config.params.tools_prompt": "{tools}",
            "config.params.answer": "no_tool_call", "config.params.answer_tag": "answer", "config.max_turns": "2",
            "config.max_episode_tokens": "1024", "config.max_turn_tokens": "256", "config.tool_timeout_s": "5",
            "config.tool_memory_mb": "512", "config.max_observation_chars": "2000", "action": "save"})  # fmt: skip
        self.assertFalse(Environment.objects.filter(name="leak-page").exists())
        self.assertIn(OUTSIDE, response.context["errors"]["config.params.tools"])
        # The next save, with documents under the allowed root, works.
        body = {"team": self.team.pk, "name": "docs", "config": search_environment(str(self.documents))}
        self.assertEqual(client.post("/api/environments/", body, format="json").status_code, 201)

    def test_a_saved_environment_that_now_reads_the_data_folder_is_refused_on_try_launch_and_the_worker(self):
        # Saved when its documents were a real file; the file became a link into the data folder after.
        environment = Environment.objects.create(team=self.team, name="docs", config=search_environment(
            str(self.documents)))  # fmt: skip
        environment.record_version(self.bob)
        self.documents.unlink()
        self.documents.symlink_to(self.first_login)
        response = self.client_for(self.bob).post(f"/api/environments/{environment.pk}/try/",
                                                  {"rows": ROWS, "model": "/models/tiny"}, format="json")  # fmt: skip
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["config.params.tools.0.params.dataset"])
        self.assertNotIn(PASSWORD, response.content.decode())
        response = self.launch({"environment": environment.config})
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["environment.params.tools.0.params.dataset"])
        # The worker checks again before it loads anything (the studio's check may be stale).
        answer = try_environment(environment.config, {"model_path": "/models/tiny", "checkpoint": None}, ROWS, 1,
                                 team_id=self.team.pk)  # fmt: skip
        self.assertIn("params.tools.0.params.dataset", answer["error"])
        self.assertIn(OUTSIDE, answer["error"])
        self.assertNotIn(PASSWORD, answer["error"])
        # Put back, the same environment launches.
        self.documents.unlink()
        write_jsonl(self.documents, [{"title": "t", "text": "public"}])
        self.assertEqual(self.launch({"environment": environment.config}).status_code, 201)

    # ---- files inside a named folder, each where it really lies

    def test_a_dataset_folder_whose_files_link_into_the_data_folder_is_refused_and_never_previewed(self):
        client = self.client_for(self.bob)
        folder = self.linked_folder("hf_links", {"train.jsonl": self.first_login})
        response = client.post("/api/datasets/", {"team": self.team.pk, "name": "l", "path": str(folder)},
                               format="json")  # fmt: skip
        self.assertEqual(response.status_code, 400)
        self.assertIn("train.jsonl", response.json()["path"][0])
        self.assertIn(OUTSIDE, response.json()["path"][0])
        self.assertNotIn(PASSWORD, response.content.decode())
        # A folder registered while its files were real, whose file became a link afterwards.
        good = self.tmp / "hf_ok"
        good.mkdir()
        write_jsonl(good / "train.jsonl", ROWS)
        response = client.post("/api/datasets/", {"team": self.team.pk, "name": "ok", "path": str(good)},
                               format="json")  # fmt: skip
        self.assertEqual(response.status_code, 201, response.content)
        dataset = Dataset.objects.get(pk=response.json()["id"])
        (good / "train.jsonl").unlink()
        (good / "train.jsonl").symlink_to(self.first_login)
        response = client.get(f"/api/datasets/{dataset.pk}/preview/")
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["detail"])
        self.assertNotIn(PASSWORD, response.content.decode())
        self.client.force_login(self.bob)
        page = self.client.get(f"/datasets/{dataset.pk}/")
        self.assertEqual(page.status_code, 200)
        self.assertNotIn(PASSWORD, page.content.decode())
        self.assertIn(OUTSIDE, page.context["errors"]["path"])
        # A run reading it is refused at launch too.
        response = self.launch({"data": {"path": str(good)}})
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["data.path"])
        # Put back, the next preview works.
        (good / "train.jsonl").unlink()
        write_jsonl(good / "train.jsonl", ROWS)
        response = client.get(f"/api/datasets/{dataset.pk}/preview/")
        self.assertEqual(response.status_code, 200)
        self.assertEqual(len(response.json()["rows"]), 2)

    def test_a_model_folder_whose_files_link_to_another_teams_checkpoint_is_refused(self):
        borrowed = self.linked_folder("borrowed", {
            "config.json": self.their_checkpoint / "config.json",
            "model.safetensors": self.their_checkpoint / "model.safetensors"})  # fmt: skip
        nested = self.tmp / "nested"
        nested.mkdir()
        (nested / "config.json").write_text("{}")
        (nested / "weights").symlink_to(self.their_checkpoint)  # a linked folder is followed too
        for folder in (borrowed, nested):
            fields = {
                "model.path": {"model": {"path": str(folder)}},
                "model.ref_path": {"model": {"ref_path": str(folder)}},
                "checkpoint.resume_from": {"checkpoint": {"resume_from": str(folder)}},
                "eval.checkpoint": {"eval": {"checkpoint": str(folder)}},
            }
            for field, overrides in fields.items():
                with self.subTest(folder=folder.name, field=field):
                    response = self.launch(overrides)
                    self.assertEqual(response.status_code, 400, response.content)
                    self.assertIn(OUTSIDE, response.json()[field])
        self.assertFalse(Run.objects.filter(team=self.team).exists())
        # The environment try-it's model and a local judge model are the same rule.
        environment = Environment.objects.create(team=self.team, name="e", config=search_environment(
            str(self.documents)))  # fmt: skip
        response = self.client_for(self.bob).post(f"/api/environments/{environment.pk}/try/",
                                                  {"rows": ROWS, "model": str(borrowed)}, format="json")  # fmt: skip
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["model"])
        body = {"team": self.team.pk, "name": "j", "spec": judge_rubric(backend="local", model=str(borrowed))}
        response = self.client_for(self.bob).post("/api/rubrics/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["spec.criteria.0.params.model"][0])
        # On the worker, before anything is loaded.
        answer = try_environment(environment.config, {"model_path": str(borrowed), "checkpoint": None}, ROWS, 1,
                                 team_id=self.team.pk)  # fmt: skip
        self.assertIn("model_path", answer["error"])
        # A real folder of its own files (and a link to this team's own checkpoint) still launches.
        mine = Run.objects.create(team=self.team, name="mine", spec={}, state="succeeded")
        own = model_folder(self.data_dir / "runs" / str(mine.pk) / "checkpoints" / "step-1")
        linked_own = self.linked_folder("own", {"config.json": own / "config.json"})
        for folder in (model_folder(self.tmp / "real_model"), linked_own):
            with self.subTest(allowed=folder.name):
                self.assertEqual(self.launch({"model": {"path": str(folder)}}).status_code, 201)

    # ---- endpoints

    def test_a_vllm_server_or_judge_outside_the_operators_list_is_refused(self):
        vllm = {"rollout": {"engine": "vllm", "vllm_server_url": "http://203.0.113.7:8000"}}
        response = self.launch(vllm)
        self.assertEqual(response.status_code, 400)
        self.assertIn("STUDIO_ALLOWED_ENDPOINTS", response.json()["rollout.vllm_server_url"])
        for url in ("http://localhost.evil.example:8000", "http://127.0.0.1@evil.example/", "file:///etc/passwd"):
            with self.subTest(url=url):
                response = self.launch({"rollout": {"engine": "vllm", "vllm_server_url": url}})
                self.assertEqual(response.status_code, 400)
                self.assertIn("rollout.vllm_server_url", response.json())
        body = {"team": self.team.pk, "name": "j", "spec": judge_rubric(base_url="https://judge.example/v1")}
        response = self.client_for(self.bob).post("/api/rubrics/", body, format="json")
        self.assertEqual(response.status_code, 400)
        self.assertIn("judge.example", response.json()["spec.criteria.0.params.base_url"][0])
        rubric = Rubric.objects.create(
            team=self.team, name="stored", spec=judge_rubric(base_url="http://evil.example/")
        )
        response = self.client_for(self.bob).post(f"/api/rubrics/{rubric.pk}/try/",
                                                  {"pairs": [{"prompt": "p", "completion": "c"}]}, format="json")  # fmt: skip
        self.assertEqual(response.status_code, 400)
        self.assertIn("spec.criteria.0.params.base_url", response.json())
        # The worker refuses it before a request is sent.
        answer = score_rubric(judge_rubric(base_url="http://evil.example/"), [{"prompt": "p", "completion": "c"}])
        self.assertIn("criteria.0.params.base_url", answer["error"])
        # The default list is this machine's loopback; the operator's list replaces it.
        self.assertEqual(self.launch({"rollout": {"engine": "vllm", "vllm_server_url": "http://127.0.0.1:8001"}})
                         .status_code, 201)  # fmt: skip
        with override_settings(ALLOWED_ENDPOINTS=["vllm.lan:8000", "https://judge.example"]):
            self.assertEqual(self.launch({"rollout": {"engine": "vllm", "vllm_server_url": "http://vllm.lan:8000/"}})
                             .status_code, 201)  # fmt: skip
            for url in ("http://vllm.lan:9000", "http://127.0.0.1:8001"):
                self.assertEqual(self.launch({"rollout": {"engine": "vllm", "vllm_server_url": url}}).status_code, 400)
            response = self.client_for(self.bob).post("/api/rubrics/", body, format="json")
            self.assertEqual(response.status_code, 201, response.content)
        # The next scoring, with no endpoint, works on the worker.
        exact = {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 1.0, "params": {}}]}
        answer = score_rubric(exact, [{"prompt": "p", "completion": "4", "answer": "4"}], team_id=self.team.pk)
        self.assertEqual(answer["results"][0]["reward"], 1.0)


def test_the_studio_tree_is_not_a_dataset_root_escape(tmp_path, settings):
    """A relative path and a `..` path resolve before the rule, file by file."""
    from studio.datasets.files import DatasetFileError
    from studio.datasets.storage import server_path

    data_dir = tmp_path / "var"
    data_dir.mkdir()
    (data_dir / "secret_key").write_text("k")
    settings.DATA_DIR, settings.DATASET_ROOTS = data_dir, [tmp_path]
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "a.jsonl").write_text('{"prompt": "p"}\n')
    assert server_path(str(tmp_path / "ok")) == tmp_path / "ok"
    (tmp_path / "ok" / "sub").mkdir()
    (tmp_path / "ok" / "sub" / "b.jsonl").symlink_to(data_dir / "secret_key")
    try:
        server_path(str(tmp_path / "ok"))
    except DatasetFileError as exc:
        assert "sub/b.jsonl" in str(exc) and OUTSIDE in str(exc)
    else:
        raise AssertionError("a folder with a link into the data folder was accepted")
