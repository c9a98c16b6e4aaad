"""The datasets page: uploading through the form."""

from __future__ import annotations

from studio.datasets.models import Dataset
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

    def test_the_pages_show_a_datasets_status_its_progress_and_its_warnings(self):
        self.client.force_login(self.carol)
        Dataset.objects.filter(pk=self.dataset.pk).update(status="checking", row_count=12345)
        page = self.client.get(f"/datasets/{self.dataset.pk}/").content.decode()
        self.assertIn("Checking every row… 12345 rows so far", page)
        self.assertIn('<meta http-equiv="refresh" content="3">', page)  # until the check ends
        self.assertIn("checking…", self.client.get("/datasets/").content.decode())
        warning = {"code": "long_prompts", "message": "2 rows have a prompt longer than 32,000 characters"}
        Dataset.objects.filter(pk=self.dataset.pk).update(status="ready", warnings=[warning])
        page = self.client.get(f"/datasets/{self.dataset.pk}/").content.decode()
        self.assertIn("⚠ 2 rows have a prompt longer than 32,000 characters", page)
        self.assertNotIn("http-equiv", page)
        Dataset.objects.filter(pk=self.dataset.pk).update(
            status="refused", status_detail="qa.jsonl: the file has no rows"
        )
        page = self.client.get(f"/datasets/{self.dataset.pk}/").content.decode()
        self.assertIn("Refused</h2><p>qa.jsonl: the file has no rows</p>", page)
        self.assertNotIn("Every row maps cleanly", page)
