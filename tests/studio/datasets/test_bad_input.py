"""Files that are no dataset, through the API and the upload form: each is refused in the request
with an error naming the field and the file, and nothing is kept (no dataset, no uploaded file)."""

from __future__ import annotations

import io
import json
import random

from django.core.files.uploadedfile import SimpleUploadedFile

from studio.datasets.models import Dataset
from tests.studio.base import StudioTestCase

LINES = ['{"prompt": "héllo", "answer": "1"}', '{"prompt": "naïve", "answer": "2"}']


class BadFilesTest(StudioTestCase):
    def post(self, name: str, content: bytes, **fields):
        file = io.BytesIO(content)
        file.name = name
        body = {"team": self.team.pk, "name": name, "file": file, **fields}
        return self.client_for(self.bob).post("/api/datasets/", body, format="multipart")

    def uploaded_files(self) -> list:
        folder = self.data_dir / "datasets"
        return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []

    def assert_refused(self, response, field: str, *fragments: str) -> None:
        self.assertEqual(response.status_code, 400, response.content)
        message = response.json()[field][0]
        for fragment in fragments:
            self.assertIn(fragment, message)
        self.assertEqual(list(Dataset.objects.exclude(pk=self.dataset.pk)), [])
        self.assertEqual(self.uploaded_files(), [])

    def test_random_bytes_named_jsonl_are_refused_as_binary_data(self):
        content = random.Random(1).randbytes(3 << 20)
        self.assert_refused(
            self.post("random.jsonl", content), "file", "random.jsonl: not UTF-8 text: looks like binary data (byte "
        )

    def test_utf16_without_a_byte_order_mark_is_refused_naming_the_encoding(self):
        content = "\n".join(LINES).encode("utf-16-le")
        self.assert_refused(
            self.post("wide.jsonl", content), "file", "wide.jsonl: not UTF-8 text: looks like UTF-16 LE without a BOM"
        )

    def test_utf16_with_a_byte_order_mark_is_read_one_row_per_line(self):
        response = self.post("wide.jsonl", "\r\n".join(LINES).encode("utf-16"))
        self.assertEqual(response.status_code, 201, response.content)
        data = response.json()
        self.assertEqual((data["status"], data["row_count"], data["error_count"]), ("ready", 2, 0))
        preview = self.client_for(self.bob).get(f"/api/datasets/{data['id']}/preview/").json()
        self.assertEqual(preview["rows"], [json.loads(line) for line in LINES])

    def test_a_file_with_no_row_that_can_be_read_is_refused_with_the_first_rows_reason(self):
        self.assert_refused(self.post("notes.jsonl", b"hello\nworld\n"), "file",
                            "notes.jsonl: none of its 2 rows can be read (row 1: not valid JSON")  # fmt: skip
        self.assert_refused(self.post("empty.csv", b"prompt,answer\n"), "file", "empty.csv: the file has no rows")

    def test_a_latin1_file_is_refused_saying_what_it_looks_like(self):
        content = '{"prompt": "café", "answer": "crème"}\n'.encode("latin-1") * 3
        self.assert_refused(self.post("latin.jsonl", content), "file", "latin.jsonl: none of its 3 rows can be read",
                            "looks like Latin-1/Windows-1252")  # fmt: skip

    def test_a_long_file_whose_head_has_no_readable_row_is_refused_in_the_request(self):
        content = b"[1, 2]\n" * 5000
        self.assert_refused(self.post("lists.jsonl", content), "file",
                            "lists.jsonl: none of its first 1,000 rows can be read (row 1: a row must be a JSON object")  # fmt: skip

    def test_the_upload_form_shows_the_error_naming_the_file_and_keeps_nothing(self):
        self.client.force_login(self.bob)
        upload = SimpleUploadedFile("random.csv", random.Random(2).randbytes(1 << 16))
        response = self.client.post("/datasets/", {"team": self.team.pk, "name": "page", "file": upload})
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "<b>file</b>: random.csv: not UTF-8 text: looks like binary data", html=False)
        self.assertFalse(Dataset.objects.filter(name="page").exists())
        self.assertEqual(self.uploaded_files(), [])


class FolderDatasetsTest(StudioTestCase):
    def register(self, path):
        body = {"team": self.team.pk, "name": "folder", "path": str(path), "format": "hf"}
        return self.client_for(self.bob).post("/api/datasets/", body, format="json")

    def model_folder(self, folder):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "tokenizer.json").write_text('{"model": {"vocab": {}}}')
        (folder / "generation_config.json").write_text('{"eos_token_id": 2}')
        (folder / "model.safetensors").write_bytes(b"\0" * 64)
        return folder

    def test_a_folder_holding_a_model_and_data_reads_only_the_data_files(self):
        project = self.tmp / "project"
        self.model_folder(project / "tiny-model")
        (project / "train.jsonl").write_text("".join(line + "\n" for line in LINES))
        response = self.register(project)
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual((response.json()["row_count"], response.json()["columns"]), (2, ["prompt", "answer"]))

    def test_a_folder_with_no_data_file_is_refused_saying_what_it_looks_for(self):
        response = self.register(self.model_folder(self.tmp / "tiny-model"))
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["path"][0], "tiny-model: no data files in the folder (looked for .jsonl, "
                         ".json, .ndjson, .csv, .parquet, .arrow); the folder holds a model, not rows")  # fmt: skip
        self.assertFalse(Dataset.objects.filter(name="folder").exists())
