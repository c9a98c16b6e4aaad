"""The datasets page: uploading through the form."""

from __future__ import annotations

from tests.studio.base import StudioTestCase


class DatasetPagesTest(StudioTestCase):
    def test_a_dataset_uploads_through_the_page(self):
        from django.core.files.uploadedfile import SimpleUploadedFile

        self.client.force_login(self.bob)
        upload = SimpleUploadedFile("page.jsonl", b'{"prompt": "x", "answer": "y"}\n')
        response = self.client.post("/datasets/", {"team": self.team.pk, "name": "page", "file": upload,
                                                   "prompt_field": "prompt", "answer_field": "answer"})  # fmt: skip
        self.assertEqual(response.status_code, 302)
        self.assertContains(self.client.get(response["Location"]), "Every row maps cleanly")
