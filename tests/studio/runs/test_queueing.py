"""What a queued run's page and API say it waits behind (studio.runs.queueing): the worker rows are
what workers write on start (studio.fleet.models.WorkerNode), here written by the test."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from studio.accounts.models import Team
from studio.fleet.models import WorkerNode
from studio.runs import queueing
from studio.runs.models import Run
from studio.sharing.models import ShareLink
from tests.studio.base import StudioTestCase


class QueueingTest(StudioTestCase):
    def worker(self, hostname: str, concurrency: int = 1, queues: tuple[str, ...] = ("gpu", "default")) -> WorkerNode:
        return WorkerNode.record_start(hostname, list(queues), [], concurrency)

    def test_with_no_worker_on_its_queue_it_says_so_and_how_to_start_one(self):
        self.worker("try@host", queues=("default",))  # serves the try-it panels, not runs
        gone = self.worker("old@host")
        WorkerNode.objects.filter(pk=gone.pk).update(last_seen=timezone.now() - timedelta(hours=1))
        text = queueing.waits_behind(self.make_run("queued"))
        self.assertTrue(text.startswith("waiting for a worker: none serving the 'gpu' queue is running"), text)
        self.assertIn("./studioctl worker --queues gpu", text)

    def test_with_every_place_taken_it_counts_the_runs_ahead_and_names_the_workers_and_its_teams_runs(self):
        self.worker("a@host")
        self.worker("b@host", concurrency=2)
        first = self.make_run("running", worker="a@host", name="demo")
        second = self.make_run("running", worker="b@host", name="sweep-2")
        theirs = Team.objects.create(name="Their team")
        Run.objects.create(team=theirs, name="secret", spec=first.spec, state="running", worker="b@host")
        self.make_run("running", worker="gone@host")  # a worker that is not online holds no place
        ahead = self.make_run("queued")
        run = self.make_run("queued")
        self.assertEqual(queueing.waits_behind(run), "waiting for a free worker: the 'gpu' queue's 3 places "
                         f"(a@host, b@host) are all taken by 3 running runs (#{first.pk} demo, #{second.pk} sweep-2 "
                         "and 1 of another team); 1 other run queued")  # fmt: skip
        self.assertEqual(queueing.waits_behind(ahead), queueing.waits_behind(run))
        self.assertEqual(queueing.waits_behind(run, name_runs=False), "waiting for a free worker: the 'gpu' queue's "
                         "3 places (a@host, b@host) are all taken by 3 running runs; 1 other run queued")  # fmt: skip

    def test_past_three_of_its_teams_runs_the_rest_are_counted(self):
        self.worker("a@host", concurrency=5)
        ids = [self.make_run("running", worker="a@host", name=f"r{i}").pk for i in range(5)]
        text = queueing.waits_behind(self.make_run("queued"))
        self.assertTrue(text.endswith(f"taken by 5 running runs (#{ids[0]} r0, #{ids[1]} r1, #{ids[2]} r2 and 2 more)"),
                        text)  # fmt: skip

    def test_with_a_free_place_it_waits_for_a_worker_to_take_it(self):
        self.worker("a@host", concurrency=2)
        self.make_run("running", worker="a@host")
        run = self.make_run("queued")
        self.assertEqual(
            queueing.waits_behind(run), "waiting for a worker to take it (1 free place on the 'gpu' queue)"
        )

    def test_it_says_nothing_for_a_run_that_says_what_it_waits_for_or_is_not_queued(self):
        self.assertEqual(queueing.waits_behind(self.make_run("queued", waiting_for="waiting for GPU 0 of a@host")), "")
        self.assertEqual(queueing.waits_behind(self.make_run("running", worker="a@host")), "")
        self.assertEqual(queueing.waits_behind(self.make_run("queued", source="trl")), "")

    def test_the_page_and_the_api_show_it_and_a_share_link_names_no_run(self):
        self.worker("a@host")
        ahead = self.make_run("running", worker="a@host", name="demo")
        run = self.make_run("queued")
        said = "waiting for a free worker: the 'gpu' queue's 1 place (a@host) is taken by 1 running run"
        self.assertEqual(self.client_for(self.carol).get(f"/api/runs/{run.pk}/").json()["queue"],
                         f"{said} (#{ahead.pk} demo)")  # fmt: skip
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{run.pk}/").content.decode().replace("&#x27;", "'")
        self.assertIn(f'<div class="run-detail note" data-run-detail>{said} (#{ahead.pk} demo)</div>', page)
        runs_list = self.client.get("/runs/").content.decode().replace("&#x27;", "'")
        self.assertIn(f'<div class="muted small" data-run-queue>{said} (#{ahead.pk} demo)</div>', runs_list)
        token = ShareLink.objects.create(run=run, created_by=self.alice).token
        self.client.logout()
        page = self.client.get(f"/share/{token}/").content.decode().replace("&#x27;", "'")
        # No other run's name, and no worker's (share views carry no host names: studio.sharing.share_view).
        self.assertIn(f'<div class="run-detail note" data-run-detail>{said.replace("a@host", "[host]")}</div>', page)
        self.assertNotIn("a@host", page)
