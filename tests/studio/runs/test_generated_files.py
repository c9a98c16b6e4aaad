"""The files the studio generates from a run (its TRL script, its verl YAML, its HTML report), fetched
through the API as a member downloads them, carry the run's user text as data: a run name, an error,
a completion, a note and a metric key written to break out of their place stay text there."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest
import yaml

from studio.runs.models import MetricPoint, Run
from studio.sharing.models import Note
from tests.studio.base import StudioTestCase
from tests.studio.records import make_rollout

NODE = shutil.which("node")
MARKUP = '</script><script>window.PWNED=1</script><img src=x onerror="window.PWNED=2"><!--'
LINK = '<a href="https://example.com/x">click</a><span style="font-size:99px">big</span>'


def code(marker) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('ran')"


class Elements(HTMLParser):
    """Each element's tag and attributes, and the text of each script (a script's body is not markup)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


class GeneratedFilesTest(StudioTestCase):
    def hostile_run(self, marker) -> Run:
        name = f'x"""\n{code(marker)}\n#\u2028{code(marker)}\n{MARKUP}'[:200]
        run = self.make_run("failed", name=name, error=f"failed: {MARKUP}")
        Run.objects.filter(pk=run.pk).update(spec={**run.spec, "name": name})
        run.refresh_from_db()
        return run

    def test_the_trl_and_verl_downloads_of_a_hostile_run_run_none_of_its_text(self):
        marker = self.tmp / "marker"
        run = self.hostile_run(marker)
        carol = self.client_for(self.carol)
        script = carol.get(f"/api/runs/{run.pk}/export/trl/").content.decode()
        tree = ast.parse(script)
        self.assertTrue(ast.get_docstring(tree, clean=False).startswith(f"Run #{run.pk} {run.name!r} as TRL GRPO"))
        config = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "CONFIG")
        self.assertEqual(ast.literal_eval(config)["run_name"], run.name)
        path = self.tmp / "export.py"
        path.write_text(script, encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r}, run_name='x')"],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        self.assertFalse(marker.exists(), done.stderr[-2000:])
        verl = carol.get(f"/api/runs/{run.pk}/export/verl/").content.decode()
        loaded = yaml.safe_load(verl)
        self.assertEqual(loaded["trainer"]["experiment_name"], run.name)
        self.assertTrue(all(line.startswith("#") for line in verl.split("\ndata:")[0].split("\n")))

    def test_the_html_report_shows_hostile_text_as_text(self):
        run = self.hostile_run(self.tmp / "marker")
        MetricPoint.objects.bulk_create(
            MetricPoint(run=run, step=s, key=key, value=s / 8, wall_time=1000.0 + s)
            for s in range(1, 4)
            for key in ("reward/mean", f"ext/{LINK}")
        )
        best = make_rollout(run, step=3, sample_index=0, reward=1.0, completion=f"best {MARKUP}", prompt=MARKUP)
        make_rollout(run, step=3, sample_index=1, reward=0.0, completion=f"worst {MARKUP}\u2028")
        Note.objects.create(run=run, rollout=best, author=self.alice, tag=MARKUP[:40], text=f"note {MARKUP}")
        html = self.client_for(self.carol).get(f"/api/runs/{run.pk}/report/").content.decode()
        page = Elements()
        page.feed(html)
        # Exactly the report's own elements: the data, plotly.js and the drawing script; no image, no handler.
        self.assertEqual([a for t, a in page.tags if t == "script"], [{"id": "report-data", "type": "application/json"},
                                                                   {}, {}])  # fmt: skip
        self.assertEqual([t for t, _ in page.tags if t in ("img", "a", "iframe", "link")], [])
        self.assertEqual([a for _, a in page.tags if any(k.startswith("on") for k in a)], [])
        data = json.loads(page.scripts[0])
        self.assertEqual(data["run"]["name"], run.name)
        self.assertEqual({r["completion"] for r in data["rollouts"]}, {f"best {MARKUP}", f"worst {MARKUP}\u2028"})
        self.assertIn(f"ext/{LINK}", data["curves"])
        self.assertNotIn("window.PWNED", page.scripts[2])
        self.assertTrue("best &lt;/script&gt;&lt;script&gt;window.PWNED=1" in html)  # the <pre>, escaped
        self.assertTrue("note &lt;/script&gt;" in html)

    @pytest.mark.skipif(NODE is None, reason="node is not installed")
    def test_the_report_hands_plotly_metric_keys_as_text_not_its_markup(self):
        run = self.make_run("succeeded")
        MetricPoint.objects.bulk_create(
            MetricPoint(run=run, step=s, key=key, value=float(s), wall_time=1000.0 + s)
            for s in range(1, 3)
            for key in ("reward/mean", f"{LINK}/x")
        )
        html = self.client_for(self.carol).get(f"/api/runs/{run.pk}/report/").content.decode()
        page = Elements()
        page.feed(html)
        data, drawing = page.scripts[0], page.scripts[2]
        # The report's own drawing script under node, with the few DOM calls it makes and a Plotly that records.
        stub = """
const nodes = {"report-data": {textContent: DATA}, "curves": {appendChild() {}}, "no-curves": {}};
global.document = {getElementById: (id) => nodes[id], createElement: () => ({})};
const drawn = [];
global.Plotly = {newPlot: (div, traces, layout) => drawn.push({title: layout.title.text, names: traces.map(t => t.name)})};
"""
        source = f"const DATA = {json.dumps(data)};\n{stub}\n{drawing}\nconsole.log(JSON.stringify(drawn));"
        out = subprocess.run([NODE, "-e", source], capture_output=True, text=True, timeout=60, check=True).stdout
        drawn = {d["title"]: d["names"] for d in json.loads(out)}

        def escaped(text):
            return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

        # A panel per namespace (the key up to its first "/"), its title and trace names as entities.
        self.assertEqual(drawn, {"reward": ["reward/mean"], escaped(LINK.split("/")[0]): [escaped(f"{LINK}/x")]})
        self.assertNotIn("<a", re.sub(r"\s", "", json.dumps(drawn)))
