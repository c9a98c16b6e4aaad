"""Datasets: upload or register, preview, field mapping, and errors that name row and field."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from studio.datasets.models import Dataset
from tests.studio.base import ROWS, StudioTestCase, write_jsonl


class DatasetsTest(StudioTestCase):
    def upload(self, name: str, content: bytes, **fields):
        file = io.BytesIO(content)
        file.name = name
        body = {"team": self.team.pk, "name": name, "file": file, **fields}
        return self.client_for(self.bob).post("/api/datasets/", body, format="multipart")

    def test_it_uploads_jsonl_and_counts_rows(self):
        response = self.upload("qa.jsonl", b'{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": "2"}\n')
        self.assertEqual(response.status_code, 201, response.content)
        data = response.json()
        self.assertEqual(
            (data["format"], data["row_count"], data["error_count"], data["source"]), ("jsonl", 2, 0, "upload")
        )
        self.assertEqual(data["columns"], ["prompt", "answer"])

    def test_it_uploads_csv_with_a_custom_mapping(self):
        response = self.upload(
            "qa.csv", b"question,gold\nWhat?,yes\nWhy?,no\n", prompt_field="question", answer_field="gold"
        )
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual((response.json()["row_count"], response.json()["error_count"]), (2, 0))

    def test_it_uploads_parquet(self):
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(ROWS * 3), buffer)
        response = self.upload("qa.parquet", buffer.getvalue())
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual(response.json()["row_count"], 6)

    def test_a_large_upload_is_streamed_to_disk_and_only_its_head_read_in_the_request(self):
        line = b'{"prompt": "' + b"x" * 1000 + b'", "answer": "1"}\n'
        with self.settings(FILE_UPLOAD_MAX_MEMORY_SIZE=64 * 1024):
            response = self.upload("big.jsonl", line * 3000)  # ~3 MB, over the in-memory limit
        self.assertEqual(response.status_code, 201, response.content)
        data = response.json()
        self.assertEqual((data["status"], data["row_count"], data["size_bytes"]), ("checking", 1000, len(line) * 3000))
        self.assertEqual(Path(data["path"]).stat().st_size, len(line) * 3000)  # the rest: test_full_check.py

    def test_it_registers_a_server_side_file_and_a_hugging_face_folder(self):
        path = write_jsonl(self.tmp / "server.jsonl", ROWS)
        response = self.client_for(self.bob).post(
            "/api/datasets/", {"team": self.team.pk, "name": "s", "path": str(path)}, format="json"
        )
        self.assertEqual((response.status_code, response.json()["source"]), (201, "server_file"))
        folder = self.tmp / "hf" / "train"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(ROWS), folder / "train-00000.parquet")
        response = self.client_for(self.bob).post(
            "/api/datasets/", {"team": self.team.pk, "name": "h", "path": str(self.tmp / "hf")}, format="json"
        )
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual((response.json()["format"], response.json()["row_count"]), ("hf", 2))

    def test_it_refuses_paths_outside_the_allowed_folders(self):
        response = self.client_for(self.bob).post(
            "/api/datasets/", {"team": self.team.pk, "name": "x", "path": "/etc/passwd"}, format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("outside the folders", response.json()["path"][0])

    def test_malformed_rows_are_reported_by_row_and_nothing_else_breaks(self):
        response = self.upload(
            "bad.jsonl", b'{"prompt": "ok", "answer": "1"}\n{not json\n[1, 2]\n{"prompt": "", "answer": "3"}\n'
        )
        self.assertEqual(response.status_code, 201)
        errors = response.json()["errors"]
        self.assertEqual([(e["row"], e["field"]) for e in errors], [(2, None), (3, None), (4, "prompt")])
        self.assertIn("not valid JSON", errors[0]["message"])
        self.assertEqual(response.json()["row_count"], 4)

    def test_a_mis_mapped_dataset_names_the_missing_field_and_cannot_be_launched(self):
        dataset = self.make_dataset(ROWS, name="mis.jsonl", prompt_field="question")
        self.assertEqual(dataset.error_count, 2)
        self.assertEqual(dataset.errors[0], {"row": 1, "field": "question", "message": "missing"})
        self.experiment.dataset = dataset
        self.experiment.save()
        response = self.client_for(self.bob).post(f"/api/experiments/{self.experiment.pk}/launch/")
        self.assertEqual(response.status_code, 400)
        # Said once, with what the rows have and what to map (issue 39: one identical line per row, "fix the file").
        self.assertEqual(response.json()["dataset"], "no row can be used in 'mis.jsonl': no row has the prompt field "
                         "'question'; rows have fields: prompt, answer: map one to prompt in the field mapping (the "
                         "dataset's page).")  # fmt: skip
        self.client.force_login(self.bob)
        page = self.client.get(f"/datasets/{dataset.pk}/").content.decode()
        self.assertIn("No row has the prompt field &#x27;question&#x27;; rows have fields: prompt, answer: map one to "
                      "prompt in the field mapping below.", page)  # fmt: skip
        self.assertNotIn("Fix the file", page)
        self.assertNotIn("fix the file", page)
        self.assertNotIn(": missing</li>", page)  # no line per row

    def test_fixing_the_mapping_rechecks_every_row(self):
        dataset = self.make_dataset(ROWS, name="fix.jsonl", prompt_field="question")
        response = self.client_for(self.bob).patch(
            f"/api/datasets/{dataset.pk}/", {"prompt_field": "prompt"}, format="json"
        )
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(Dataset.objects.get(pk=dataset.pk).error_count, 0)

    def test_chat_messages_must_be_role_content_lists(self):
        rows = [
            {"messages": [{"role": "user", "content": "hi"}]},
            {"messages": "nope"},
            {"messages": [{"content": "x"}]},
        ]
        dataset = self.make_dataset(
            rows, name="chat.jsonl", prompt_field="", messages_field="messages", answer_field=""
        )
        self.assertEqual([(e["row"], e["field"]) for e in dataset.errors], [(2, "messages"), (3, "messages[0]")])

    def test_a_row_the_run_would_refuse_is_an_error_here_too(self):
        from trainers.data.prompts import load_rows
        from trainers.data.readers import DataError
        from trainers.spec import DataSpec

        rows = [
            {"messages": [{"role": "user", "content": "hi"}], "answer": "1"},
            {"messages": [{"role": "function", "content": "x"}], "answer": "2"},  # not a chat role
            {"messages": [{"role": "user", "content": [{"type": "image"}]}], "answer": "3"},  # not text
            {"messages": [{"role": "user", "content": "ok"}], "answer": None},
        ]
        dataset = self.make_dataset(rows, name="roles.jsonl", prompt_field="", messages_field="messages")
        self.assertEqual([(e["row"], e["field"]) for e in dataset.errors],
                         [(2, "messages[0]"), (3, "messages[0]"), (4, "answer")])  # fmt: skip
        self.assertIn("role must be one of", dataset.errors[0]["message"])
        spec = DataSpec(path=dataset.path, prompt_field=None, messages_field="messages")
        with self.assertRaisesRegex(DataError, "row 2: field 'messages' message 0: role must be one of"):
            load_rows(spec)
        valid = self.make_dataset(rows[:1], name="ok.jsonl", prompt_field="", messages_field="messages")
        self.assertEqual(valid.error_count, 0)
        self.assertEqual(len(load_rows(DataSpec(path=valid.path, prompt_field=None, messages_field="messages"))), 1)

    def test_an_unknown_extension_is_refused_with_the_file_named(self):
        response = self.upload("data.txt", b"hello")
        self.assertEqual(response.status_code, 400)
        self.assertIn("data.txt", response.json()["file"][0])

    def test_preview_returns_the_first_rows(self):
        response = self.client_for(self.carol).get(f"/api/datasets/{self.dataset.pk}/preview/?limit=1")
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response.json()["rows"], [ROWS[0]])
        self.assertEqual(response.json()["row_count"], 2)

    def register(self, path):
        body = {"team": self.team.pk, "name": "x", "path": str(path), "format": "csv", "prompt_field": "p"}
        return self.client_for(self.bob).post("/api/datasets/", body, format="json")

    def test_it_refuses_the_studios_own_files_and_other_teams_uploads_and_run_outputs(self):
        secrets = {
            "secret key": self.data_dir / "secret_key",
            "database": self.data_dir / "studio.sqlite3",
            "first login": self.data_dir / "first-login.txt",
            "another team's upload": self.data_dir / "datasets" / "0f3a" / "theirs.jsonl",
            "a run's output": self.data_dir / "runs" / "7" / "metrics.jsonl",
        }
        for what, path in secrets.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("p\nsecret\n")
            with self.subTest(what=what):
                response = self.register(path)
                self.assertEqual(response.status_code, 400)
                self.assertIn("inside the studio's data folder", response.json()["path"][0])
        with self.subTest(what="the data folder by a relative path with .."):
            response = self.register(self.tmp / "hf" / ".." / "var" / "secret_key")
            self.assertEqual(response.status_code, 400)
        self.assertFalse(Dataset.objects.filter(name="x").exists())

    def test_it_refuses_a_folder_that_holds_the_data_folder(self):
        # A Hugging Face folder is read recursively: the repository would hand out var/datasets/*.
        response = self.register(self.tmp)
        self.assertEqual(response.status_code, 400)
        self.assertIn("inside the studio's data folder", response.json()["path"][0])

    def test_the_demo_folder_inside_the_data_folder_may_be_registered(self):
        demo = self.data_dir / "demo"
        demo.mkdir()
        path = write_jsonl(demo / "repeat-the-letter.jsonl", ROWS)
        response = self.client_for(self.bob).post(
            "/api/datasets/", {"team": self.team.pk, "name": "demo", "path": str(path)}, format="json"
        )
        self.assertEqual(response.status_code, 201, response.content)

    def test_a_split_cannot_be_a_path_out_of_the_dataset_folder(self):
        response = self.client_for(self.bob).patch(
            f"/api/datasets/{self.dataset.pk}/", {"split": "../var/datasets"}, format="json"
        )
        self.assertEqual(response.status_code, 400)
        self.assertIn("not a path", response.json()["split"][0])

    def test_preview_refuses_a_limit_that_is_not_a_number_naming_it(self):
        response = self.client_for(self.carol).get(f"/api/datasets/{self.dataset.pk}/preview/?limit=abc")
        self.assertEqual(response.status_code, 400)
        self.assertIn("whole number", response.json()["limit"])

    def test_preview_keeps_the_limit_between_1_and_200(self):
        rows = [{"prompt": f"q{i}", "answer": str(i)} for i in range(250)]
        dataset = self.make_dataset(rows, name="many.jsonl")
        for limit, shown in (("-5", 1), ("0", 1), ("1000", 200)):
            with self.subTest(limit=limit):
                response = self.client_for(self.carol).get(f"/api/datasets/{dataset.pk}/preview/?limit={limit}")
                self.assertEqual((response.status_code, len(response.json()["rows"])), (200, shown))

    def test_deleting_a_dataset_that_experiments_use_is_a_conflict_naming_them(self):
        response = self.client_for(self.bob).delete(f"/api/datasets/{self.dataset.pk}/")
        self.assertEqual(response.status_code, 409)
        self.assertIn(f'experiment "Exp" (id {self.experiment.pk})', response.json()["detail"])
        self.assertTrue(Dataset.objects.filter(pk=self.dataset.pk).exists())
        unused = self.make_dataset(name="unused.jsonl")
        self.assertEqual(self.client_for(self.bob).delete(f"/api/datasets/{unused.pk}/").status_code, 204)


class UploadedFilesTest(StudioTestCase):
    """An upload's file lives exactly as long as its dataset: never written for someone who may
    not create one, removed when it cannot be read, and when its dataset is deleted."""

    def post(self, user, name: str, content: bytes):
        file = io.BytesIO(content)
        file.name = name
        body = {"team": self.team.pk, "name": name, "file": file}
        return self.client_for(user).post("/api/datasets/", body, format="multipart")

    def uploaded_files(self) -> list:
        folder = self.data_dir / "datasets"
        return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []

    def test_a_viewers_or_an_outsiders_upload_is_refused_before_it_is_written(self):
        self.assertEqual(self.post(self.carol, "qa.jsonl", b'{"prompt": "a"}\n').status_code, 403)
        self.assertEqual(self.post(self.charlie, "qa.jsonl", b'{"prompt": "a"}\n').status_code, 404)
        self.assertEqual(self.uploaded_files(), [])

    def test_an_upload_that_cannot_be_read_is_not_kept(self):
        self.assertEqual(self.post(self.bob, "notes.docx", b"binary").status_code, 400)  # no reader for it
        self.assertEqual(self.post(self.bob, "qa.parquet", b"not parquet at all").status_code, 400)
        self.assertEqual(self.uploaded_files(), [])

    def test_deleting_an_uploaded_dataset_deletes_its_file_and_nothing_else(self):
        response = self.post(self.bob, "qa.jsonl", b'{"prompt": "a", "answer": "1"}\n')
        self.assertEqual(response.status_code, 201, response.content)
        [file] = self.uploaded_files()
        self.assertEqual(self.client_for(self.bob).delete(f"/api/datasets/{response.json()['id']}/").status_code, 204)
        self.assertEqual(self.uploaded_files(), [])
        self.assertFalse(file.parent.exists())
        # A registered server file is the owner's, not the studio's: deleting the dataset keeps it.
        server_file = self.dataset.path
        self.experiment.delete()
        self.assertEqual(self.client_for(self.bob).delete(f"/api/datasets/{self.dataset.pk}/").status_code, 204)
        self.assertTrue(Path(server_file).exists())
