"""A run's provenance (workers.provenance records it as the worker starts the run; studio.runs.provenance
reads it), "Run again exactly" (studio.runs.lifecycle.rerun_exactly) and the run's exports and HTML report.

The worker's record is made by calling workers.provenance.record with the run's spec, as workers.tasks
does right before training: the test stops there, since the experiment's model is a name, not a folder."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path

import torch

from studio.experiments.specs import validate
from studio.runs import html_report
from studio.runs.models import MetricPoint, Run
from studio.sharing.models import Note, ShareLink
from tests.studio.base import StudioTestCase
from tests.studio.records import make_rollout
from workers import provenance
from workers.tasks import run_spec


def canonical_sha(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ProvenanceTest(StudioTestCase):
    def started(self, run: Run):
        """The worker's first step for `run`: record its provenance; returns the spec it trains with."""
        Run.objects.filter(pk=run.pk).update(state="running", worker="celery@test-host")
        spec = provenance.record(run, run_spec(run), devices=[])
        run.refresh_from_db()
        return spec

    def test_the_worker_records_what_produced_the_run_and_trains_on_a_snapshot_of_its_data(self):
        run = self.make_run("queued")
        original = Path(self.dataset.path)
        spec = self.started(run)
        record = run.provenance
        [data] = record["inputs"]
        self.assertEqual(data["field"], "data.path")
        self.assertEqual(data["sha256"], hashlib.sha256(original.read_bytes()).hexdigest())
        self.assertEqual((data["bytes"], data["files"]), (original.stat().st_size, 1))
        snapshot = Path(data["snapshot"])
        self.assertEqual(snapshot, self.data_dir / "runs" / str(run.pk) / "inputs" / "data.path" / "qa.jsonl")
        self.assertEqual(snapshot.read_bytes(), original.read_bytes())
        self.assertEqual(spec.data.path, str(snapshot))  # it trains on the bytes it digested
        self.assertEqual(record["spec"], run.spec)
        # Rubrics have no version: the digest of the definition the run carries, and the row it came from.
        self.assertEqual(record["rubric"]["sha256"], canonical_sha(run.spec["rubric"]))
        self.assertEqual((record["rubric"]["id"], record["rubric"]["name"]), (self.rubric.pk, "Correct"))
        self.assertEqual((record["dataset"]["id"], record["dataset"]["path"]), (self.dataset.pk, str(original)))
        self.assertIsNone(record["environment"])
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
        self.assertEqual(record["code"]["commit"], head or None)
        self.assertEqual(record["packages"]["torch"], metadata.version("torch"))
        self.assertEqual(record["packages"]["transformers"], metadata.version("transformers"))
        self.assertEqual(record["packages"]["rollout-studio"], "0.1.0")
        self.assertEqual(record["seeds"], {"optim.seed": 0})
        self.assertEqual(record["device"]["device"], "cuda" if torch.cuda.is_available() else "cpu")
        self.assertEqual(record["machine"]["worker"], "celery@test-host")
        self.assertTrue(record["machine"]["hostname"] and record["machine"]["cpu"])

        # A restarted attempt keeps the record (and its snapshot) and notes where it ran.
        again = provenance.record(run, run_spec(run), devices=[])
        run.refresh_from_db()
        self.assertEqual(again.data.path, str(snapshot))
        self.assertEqual(len(run.provenance["later_attempts"]), 1)
        self.assertEqual(run.provenance["inputs"], record["inputs"])

    def test_run_again_exactly_of_an_untouched_rubric_does_not_say_it_was_changed(self):
        # Issue 39: the rubric row's definition is the user's (no defaults filled), the run's rubric section the
        # validated one; comparing the two said "was changed since" of a rubric whose stored time equals the record's.
        self.rubric.spec = {"criteria": [{"name": "correct", "kind": "exact_match"}]}  # weight and params left out
        self.rubric.save()
        run = self.make_run("queued", spec=validate(self.experiment.spec_config()))  # as a launch stores it
        self.started(run)
        self.assertNotEqual(run.provenance["rubric"]["sha256"], run.provenance["rubric"]["row_sha256"])
        self.assertEqual(run.provenance["rubric"]["updated"], self.rubric.updated.isoformat())
        Run.objects.filter(pk=run.pk).update(state="succeeded")
        answer = self.client_for(self.bob).post(f"/api/runs/{run.pk}/rerun/")
        self.assertEqual(answer.status_code, 201, answer.content)
        self.assertFalse([n for n in answer.json()["differences_now"] if "rubric" in n], answer.json())

    def test_run_again_exactly_pins_the_inputs_and_says_what_changed_since(self):
        run = self.make_run("queued")
        self.started(run)
        Run.objects.filter(pk=run.pk).update(state="succeeded")
        snapshot = run.provenance["inputs"][0]["snapshot"]
        # Since then: the file gained a row and the rubric was edited.
        with open(self.dataset.path, "a") as out:
            out.write(json.dumps({"prompt": "1+1?", "answer": "2"}) + "\n")
        self.rubric.spec = {"criteria": [{"name": "correct", "kind": "exact_match", "weight": 2.0, "params": {}}]}
        self.rubric.save()

        self.assertEqual(self.client_for(self.carol).post(f"/api/runs/{run.pk}/rerun/").status_code, 403)  # viewer
        answer = self.client_for(self.bob).post(f"/api/runs/{run.pk}/rerun/")
        self.assertEqual(answer.status_code, 201, answer.content)
        body = answer.json()
        new = Run.objects.get(pk=body["id"])
        self.assertEqual(new.repeat_of_id, run.pk)
        self.assertEqual(new.spec["data"]["path"], snapshot)  # the bytes the run read, not the file as it is now
        self.assertEqual(new.spec["rubric"], run.provenance["spec"]["rubric"])  # weight 1.0, as the run scored
        changed = " | ".join(body["differences_now"])
        self.assertIn("data.path:", changed)
        self.assertIn("changed since", changed)
        self.assertIn("rubric 'Correct' was changed since", changed)
        self.assertIn("runs run #", " ".join(e.payload.get("line", "") for e in new.events.filter(kind="log")))

        # The re-run's worker reads the snapshot where it lies (no second copy), and the two records agree.
        self.started(new)
        self.assertEqual(new.provenance["inputs"][0]["snapshot"], snapshot)
        self.assertEqual(new.provenance["inputs"][0]["sha256"], run.provenance["inputs"][0]["sha256"])
        self.assertFalse((self.data_dir / "runs" / str(new.pk) / "inputs").exists())
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{new.pk}/")
        self.assertEqual(page.context["repeats"]["differences"], [])
        self.assertContains(page, "Nothing recorded differs")

    def test_a_run_without_provenance_is_not_offered_again_exactly(self):
        run = self.make_run("succeeded")
        self.assertNotIn("rerun", run.actions())
        answer = self.client_for(self.bob).post(f"/api/runs/{run.pk}/rerun/")
        self.assertEqual(answer.status_code, 409)
        self.assertIn("recorded no provenance", answer.json()["detail"])
        # A snapshot that is gone refuses too, naming it.
        self.started(run)
        Path(run.provenance["inputs"][0]["snapshot"]).unlink()
        self.assertIn("rerun", run.actions())
        refused = self.client_for(self.bob).post(f"/api/runs/{run.pk}/rerun/")
        self.assertEqual(refused.status_code, 409)
        self.assertIn("the snapshot of data.path", refused.json()["detail"])

    def test_differences_between_two_records_are_named(self):
        run = self.make_run("queued")
        self.started(run)
        before = run.provenance
        after = json.loads(json.dumps(before))
        after["packages"]["torch"] = "9.9.9"
        after["device"]["device"] = "cuda"
        after["inputs"][0]["sha256"] = "0" * 64
        from studio.runs.provenance import differences

        self.assertEqual(
            differences(before, after),
            [f"data.path: other bytes ({before['inputs'][0]['sha256'][:12]} then, {'0' * 12} now)",
             f"torch: {before['packages']['torch']} then, 9.9.9 now",
             f"device device: {before['device']['device']} then, cuda now"],
        )  # fmt: skip

    def test_the_run_page_shows_provenance_and_exports_to_members_only(self):
        run = self.make_run("succeeded")
        self.started(run)
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{run.pk}/").content.decode()
        self.assertIn('data-provenance id="provenance"', page)
        self.assertIn(run.provenance["inputs"][0]["sha256"][:12], page)
        self.assertIn(f'href="/api/runs/{run.pk}/export/trl/"', page)
        self.assertIn('data-export-losses="verl"', page)
        link = ShareLink.objects.create(run=run, created_by=self.alice)
        self.client.logout()
        shared = self.client.get(f"/share/{link.token}/").content.decode()
        self.assertNotIn("data-provenance", shared)
        self.assertNotIn("/export/trl/", shared)


class Tags(HTMLParser):
    """The document's tags with their attributes, and any src/href/action pointing outside the file."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict]] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.seen.append((tag, attrs))
        for name in ("src", "href", "action"):
            value = (attrs.get(name) or "").strip().lower()
            if value.startswith(("http:", "https:", "//")):
                self.external.append(f"{tag} {name}={value}")


class ExportsApiTest(StudioTestCase):
    def test_the_exports_name_what_they_lose_and_download(self):
        run = self.make_run("succeeded")
        Run.objects.filter(pk=run.pk).update(spec={**run.spec, "algorithm": {"dynamic_sampling": True}})
        carol = self.client_for(self.carol)
        losses = carol.get(f"/api/runs/{run.pk}/exports/").json()
        trl = {u["field"]: u for u in losses["trl"]["unmapped"]}
        self.assertFalse(trl["algorithm.dynamic_sampling"]["default"])
        self.assertIn("no DAPO dynamic sampling", trl["algorithm.dynamic_sampling"]["why"])
        self.assertNotIn("algorithm.dynamic_sampling", {u["field"] for u in losses["verl"]["unmapped"]})
        script = carol.get(f"/api/runs/{run.pk}/export/trl/")
        self.assertEqual(script.status_code, 200)
        self.assertIn("attachment;", script["Content-Disposition"])
        self.assertIn("config = GRPOConfig(**CONFIG)", script.content.decode())
        self.assertIn("algorithm.dynamic_sampling = true [changed from the default]", script.content.decode())
        yaml_file = carol.get(f"/api/runs/{run.pk}/export/verl/").content.decode()
        self.assertIn("filter_groups:", yaml_file)
        self.assertEqual(
            self.client_for(self.charlie).get(f"/api/runs/{run.pk}/exports/").status_code, 404
        )  # not a member

    def test_the_html_report_is_self_contained_and_holds_the_run(self):
        run = self.make_run("succeeded")
        MetricPoint.objects.bulk_create(
            MetricPoint(run=run, step=s, key="reward/mean", value=s / 8, wall_time=1000.0 + s) for s in range(1, 5)
        )
        best = make_rollout(run, step=4, sample_index=0, reward=1.0, completion="THE-BEST-COMPLETION")
        make_rollout(run, step=4, sample_index=1, reward=0.0, completion="THE-WORST-COMPLETION")
        Note.objects.create(run=run, rollout=best, author=self.alice, tag="reward hacking", text="NOTE-TEXT-42")
        response = self.client_for(self.carol).get(f"/api/runs/{run.pk}/report/")
        self.assertEqual(response.status_code, 200)
        self.assertIn(f'filename="run-{run.pk}-run.html"', response["Content-Disposition"])
        html = response.content.decode()
        # Every tag's src and href, as a browser reads them (a script's body is not markup): none leaves the file.
        tags = Tags()
        tags.feed(html)
        self.assertEqual([t for t in tags.external if t], [])
        self.assertEqual({name for name, _ in tags.seen} & {"link", "iframe", "img"}, set())
        self.assertEqual([attrs.get("src") for name, attrs in tags.seen if name == "script"], [None, None, None])
        # plotly.js is inlined whole, as the installed package ships it (its own strings name its website).
        self.assertIn(html_report.plotly_source(), html)
        data = json.loads(re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html, re.S)[1])
        self.assertEqual(data["curves"]["reward/mean"], {"x": [1.0, 2.0, 3.0, 4.0], "y": [0.125, 0.25, 0.375, 0.5]})
        self.assertEqual([(r["why"], r["reward"]) for r in data["rollouts"]],
                         [("noted", 1.0), ("worst of step 4", 0.0)])  # fmt: skip
        for text in ("THE-BEST-COMPLETION", "THE-WORST-COMPLETION", "NOTE-TEXT-42", "&quot;total_steps&quot;: 5"):
            self.assertTrue(text in html, f"{text!r} is not in the report")  # (assertIn would print 5 MB)
