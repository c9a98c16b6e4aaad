"""The teacher section (on-policy distillation) in the studio: its models and endpoints go through the one path
policy on launch (another team's checkpoint and an endpoint off the operator's list are refused, the team's own
run's checkpoint and an allowed endpoint accepted), and the experiment form shows the section."""

from __future__ import annotations

from django.test import override_settings

from studio.runs.models import Run
from tests.studio.base import StudioTestCase, model_folder

OUTSIDE = "inside the studio's data folder"


class TeacherSettingsTest(StudioTestCase):
    def launch(self, teachers: list[dict], user=None):
        url = f"/api/experiments/{self.experiment.pk}/launch/"
        body = {"overrides": {"teacher": {"teachers": teachers}}}
        return self.client_for(user or self.bob).post(url, body, format="json")

    def test_a_teacher_cannot_be_another_teams_checkpoint_but_may_be_the_teams_own(self):
        theirs = Run.objects.create(team=self.other_team, name="theirs", spec={}, state="succeeded")
        their_checkpoint = model_folder(self.data_dir / "runs" / str(theirs.pk) / "checkpoints" / "step-1")
        response = self.launch([{"name": "theirs", "path": str(their_checkpoint)}])
        self.assertEqual(response.status_code, 400)
        self.assertIn(OUTSIDE, response.json()["teacher.teachers.0.path"])
        self.assertFalse(Run.objects.filter(team=self.team).exists())
        mine = Run.objects.create(team=self.team, name="mine", spec={}, state="succeeded")
        own = model_folder(self.data_dir / "runs" / str(mine.pk) / "checkpoints" / "step-2")
        response = self.launch([{"name": "mine", "path": str(own)}, {"name": "hub", "path": "Qwen/Qwen2.5-0.5B"}])
        self.assertEqual(response.status_code, 201, response.content)

    def test_an_endpoint_teacher_must_be_on_the_operators_list(self):
        teacher = {"name": "api", "base_url": "http://203.0.113.7:8000/v1", "model": "big"}
        response = self.launch([teacher])
        self.assertEqual(response.status_code, 400)
        self.assertIn("STUDIO_ALLOWED_ENDPOINTS", response.json()["teacher.teachers.0.base_url"])
        with override_settings(ALLOWED_ENDPOINTS=["203.0.113.7:8000"]):
            self.assertEqual(self.launch([teacher]).status_code, 201)

    def test_the_experiment_form_shows_the_teacher_section(self):
        self.client.force_login(self.bob)
        page = self.client.get("/experiments/new/").content.decode()
        self.assertIn("Teachers (on-policy distillation)", page)
        self.assertIn('name="teacher.teachers"', page)
        self.assertIn('name="teacher.route_field"', page)
