"""The Content-Security-Policy: every page is sent with one that runs only the studio's own script
files, and no page holds a script the policy would block (an inline script or event handler)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from studio.environments.models import Environment
from studio.sharing.models import ShareLink
from tests.studio.base import StudioTestCase
from tests.studio.environment_kind import CONFIG


def policy(response) -> dict[str, list[str]]:
    """The response's Content-Security-Policy as {directive: [sources]}."""
    header = response.get("Content-Security-Policy", "")
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in header.split(";")) if d}


class Scripts(HTMLParser):
    """The page's inline scripts and inline event handlers, which the policy blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.inline += [f"<{tag} {name}=...>" for name in attrs if name.startswith("on")]
        self.inline += [f"<{tag} {k}={v!r}>" for k, v in attrs.items() if (v or "").strip().startswith("javascript:")]
        self._in_script = tag == "script" and "src" not in attrs and attrs.get("type") != "application/json"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline.append(f"<script>{data.strip()[:60]}</script>")


class ContentSecurityPolicyTest(StudioTestCase):
    def pages(self) -> list[str]:
        run = self.make_run(state="running")
        environment = Environment.objects.create(team=self.team, name="env", config=CONFIG, created_by=self.alice)
        link = ShareLink.objects.create(run=run, created_by=self.alice)
        return ["/", "/teams/", "/datasets/", f"/datasets/{self.dataset.pk}/", "/rubrics/", "/rubrics/new/",
                f"/rubrics/{self.rubric.pk}/", "/environments/", "/environments/new/",
                f"/environments/{environment.pk}/", "/experiments/", "/experiments/new/",
                f"/experiments/{self.experiment.pk}/", f"/experiments/{self.experiment.pk}/edit/", "/runs/",
                f"/runs/{run.pk}/", f"/runs/{run.pk}/prompts/", f"/compare/?runs={run.pk}", "/fleet/",
                link.path]  # fmt: skip

    def test_every_page_runs_only_the_studios_own_scripts(self):
        self.client.force_login(self.alice)
        for url in self.pages():
            with self.subTest(url=url):
                response = self.client.get(url)
                self.assertEqual(response.status_code, 200, url)
                csp = policy(response)
                self.assertEqual(csp.get("script-src"), ["'self'"])
                self.assertEqual(csp.get("default-src"), ["'self'"])
                self.assertEqual(csp.get("object-src"), ["'none'"])
                self.assertEqual(csp.get("connect-src"), ["'self'"])
                scripts = Scripts()
                scripts.feed(response.content.decode())
                self.assertEqual(scripts.inline, [])
                for src in re.findall(r'<script[^>]*\ssrc="([^"]+)"', response.content.decode()):
                    self.assertTrue(src.startswith("/"), f"{src} is not the studio's own")

    def test_the_sign_in_page_and_errors_carry_the_policy_too(self):
        for url, status in (("/login/", 200), ("/no-such-page/", 404)):
            with self.subTest(url=url):
                response = self.client.get(url)
                self.assertEqual(response.status_code, status)
                self.assertEqual(policy(response).get("script-src"), ["'self'"])
