"""Team members: roles come from the fixed list, and a team always keeps an owner."""

from __future__ import annotations

from studio.accounts.models import EDITOR, OWNER
from tests.studio.base import StudioTestCase


class TeamsTest(StudioTestCase):
    def add(self, user, username: str, role: str):
        return self.client_for(user).post(f"/api/teams/{self.team.pk}/members/", {"username": username, "role": role})

    def test_the_last_owner_cannot_be_demoted(self):
        response = self.add(self.alice, "alice", EDITOR)
        self.assertEqual(response.status_code, 400)
        self.assertIn("at least one owner", response.json()["role"][0])
        self.assertEqual(self.team.role_of(self.alice), OWNER)

    def test_an_owner_can_be_demoted_once_there_is_another(self):
        self.assertEqual(self.add(self.alice, "bob", OWNER).status_code, 201)
        self.assertEqual(self.add(self.bob, "alice", EDITOR).status_code, 201)
        self.assertEqual((self.team.role_of(self.alice), self.team.role_of(self.bob)), (EDITOR, OWNER))

    def test_the_teams_page_offers_viewer_as_a_new_members_role(self):
        self.client.force_login(self.alice)
        page = self.client.get("/teams/").content.decode()
        self.assertIn('<option value="viewer" selected>Viewer</option>', page)
        self.assertNotIn('<option value="owner" selected>', page)

    def test_the_teams_page_refuses_a_role_that_does_not_exist(self):
        self.client.force_login(self.alice)
        page = {"add_member": "1", "team": self.team.pk, "username": "charlie"}
        response = self.client.post("/teams/", {**page, "role": "superuser"}, follow=True)
        self.assertContains(response, "Unknown role")
        self.assertIsNone(self.team.role_of(self.charlie))
        self.client.post("/teams/", {**page, "role": "viewer"})
        self.assertEqual(self.team.role_of(self.charlie), "viewer")

    def test_the_teams_page_refuses_to_demote_the_last_owner(self):
        self.client.force_login(self.alice)
        body = {"add_member": "1", "team": self.team.pk, "username": "alice", "role": "viewer"}
        response = self.client.post("/teams/", body, follow=True)
        self.assertContains(response, "at least one owner")
        self.assertEqual(self.team.role_of(self.alice), OWNER)
