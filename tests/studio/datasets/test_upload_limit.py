"""The upload size limit (STUDIO_MAX_UPLOAD_MB): refused from the Content-Length before the body is
read (ASGI), or by counting as the file arrives; the message names the limit, and nothing is kept."""

from __future__ import annotations

import io
import json

from asgiref.testing import ApplicationCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from studio.datasets.models import Dataset
from tests.studio.base import StudioTestCase

MB = 1024 * 1024
LIMIT = "larger than the limit of 1 MB (STUDIO_MAX_UPLOAD_MB)"


def rows(megabytes: float) -> bytes:
    line = b'{"prompt": "' + b"x" * 1000 + b'", "answer": "1"}\n'
    return line * int(megabytes * MB / len(line))


@override_settings(MAX_UPLOAD_MB=1)
class UploadLimitTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.temp_dir = self.tmp / "upload-temp"  # where Django puts uploads as they arrive
        self.temp_dir.mkdir()
        override = override_settings(FILE_UPLOAD_TEMP_DIR=str(self.temp_dir))
        override.enable()
        self.addCleanup(override.disable)

    def post(self, name: str, content: bytes):
        file = io.BytesIO(content)
        file.name = name
        body = {"team": self.team.pk, "name": name, "file": file}
        return self.client_for(self.bob).post("/api/datasets/", body, format="multipart")

    def assert_nothing_kept(self) -> None:
        self.assertEqual(list(Dataset.objects.exclude(pk=self.dataset.pk)), [])
        self.assertEqual([p for p in (self.data_dir / "datasets").rglob("*") if p.is_file()], [])
        self.assertEqual(list(self.temp_dir.iterdir()), [])

    def test_a_request_longer_than_the_limit_is_refused_from_its_content_length(self):
        response = self.post("big.jsonl", rows(3))
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["file"][0], f"big.jsonl: the upload is 3 MB, {LIMIT}; nothing was kept")
        self.assert_nothing_kept()

    def test_a_file_past_the_limit_is_refused_by_counting_its_bytes(self):
        # 1.5 MB: within the Content-Length allowance for form fields, over the limit for the file.
        response = self.post("big.jsonl", rows(1.5))
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["file"][0], f"big.jsonl: the upload is {LIMIT}; nothing was kept")
        self.assert_nothing_kept()

    def test_a_file_under_the_limit_is_kept(self):
        response = self.post("small.jsonl", rows(0.9))
        self.assertEqual(response.status_code, 201, response.content)
        self.assertEqual(response.json()["row_count"], rows(0.9).count(b"\n"))

    def test_the_upload_form_names_the_limit(self):
        self.client.force_login(self.bob)
        upload = SimpleUploadedFile("big.jsonl", rows(1.5))
        response = self.client.post("/datasets/", {"team": self.team.pk, "name": "page", "file": upload})
        self.assertContains(response, f"big.jsonl: the upload is {LIMIT}")
        self.assert_nothing_kept()


async def http(scope_headers: list[tuple[bytes, bytes]], chunks: list[bytes], path: str = "/api/datasets/"):
    """POST through the studio's own ASGI application; (status, headers, body) of its answer."""
    from studio.asgi import application

    scope = {"type": "http", "http_version": "1.1", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"host", b"localhost"), *scope_headers], "scheme": "http",
             "server": ("localhost", 80), "client": ("127.0.0.1", 5000)}  # fmt: skip
    communicator = ApplicationCommunicator(application, scope)
    for i, chunk in enumerate(chunks):
        await communicator.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
    start = await communicator.receive_output(timeout=10)
    body = await communicator.receive_output(timeout=10)
    await communicator.wait(timeout=10)
    return start["status"], dict(start["headers"]), body["body"]


async def test_the_web_server_refuses_a_body_over_the_limit_from_its_content_length(settings):
    settings.MAX_UPLOAD_MB = 1
    status, headers, body = await http([(b"content-length", str(3 * MB).encode())], [b"x" * MB] * 3)
    assert (status, headers[b"content-type"]) == (413, b"application/json")
    assert json.loads(body) == {"file": [f"the upload is 3 MB, {LIMIT}; nothing was kept"]}
    status, headers, body = await http([(b"content-length", str(3 * MB).encode())], [b"x" * MB] * 3, "/datasets/")
    assert (status, headers[b"content-type"]) == (413, b"text/html; charset=utf-8")
    assert f"The upload is 3 MB, {LIMIT}".encode() in body


async def test_the_web_server_cuts_off_a_body_with_no_length_past_the_limit(settings):
    settings.MAX_UPLOAD_MB = 1
    status, _, body = await http([], [b"x" * MB] * 3)  # chunked: no Content-Length to go by
    assert status == 413
    assert json.loads(body) == {"file": [f"the upload is {LIMIT}; nothing was kept"]}


async def test_a_body_under_the_limit_reaches_the_studio(settings):
    settings.MAX_UPLOAD_MB = 1
    status, _, body = await http([(b"content-length", b"2")], [b"{}"])
    assert status == 403  # the API's own answer to a request without a login: not refused for its size
    assert b"credentials were not provided" in body
