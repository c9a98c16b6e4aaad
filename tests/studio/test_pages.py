"""Every plain page: it renders for members and refuses outsiders."""

from __future__ import annotations

from tests.studio.base import StudioTestCase


class PagesTest(StudioTestCase):
    def test_pages_ask_anonymous_visitors_to_sign_in(self):
        response = self.client.get("/experiments/")
        self.assertEqual(response.status_code, 302)
        self.assertTrue(response["Location"].startswith("/login/"))
        self.assertContains(self.client.get("/login/"), "Sign in")

    def test_every_list_and_detail_page_renders_for_a_viewer(self):
        self.client.force_login(self.carol)
        run = self.make_run()
        for url in ("/", "/teams/", "/datasets/", f"/datasets/{self.dataset.pk}/", "/rubrics/", f"/rubrics/{self.rubric.pk}/",
                    "/experiments/", f"/experiments/{self.experiment.pk}/", "/runs/"):  # fmt: skip
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url).status_code, 200)
        self.assertContains(self.client.get("/runs/"), f"/runs/{run.pk}/")

    def test_outsiders_get_404_on_detail_pages(self):
        self.client.force_login(self.charlie)
        for url in (
            f"/datasets/{self.dataset.pk}/",
            f"/rubrics/{self.rubric.pk}/",
            f"/experiments/{self.experiment.pk}/",
        ):
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url).status_code, 404)
