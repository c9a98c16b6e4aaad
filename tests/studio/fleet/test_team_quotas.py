"""Team limits (studio.fleet.quotas) as the queue applies them, and fair starts (studio.fleet.fairness).

At the level of the worker's claim (workers.launch.claim_fairly: the transaction that reads the limits,
leases the GPUs and starts the run) on the real database, with a fake GPU inventory as the other lease tests
use (workers.gpu.pool_gpus: no CUDA here). No Celery worker runs: a test takes the place of the worker's
pool process that took a run's message (the message's run is the argument), which is what the real worker
does with it. Messages go to the test settings' in-memory broker.

alice's team ("Alice's team") is limited; charlie's team is the other team, whose runs must start meanwhile.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

from django.contrib.auth import get_user_model
from django.utils import timezone

from studio.fleet import quotas
from studio.fleet.models import TeamQuota, WorkerNode
from studio.runs import lifecycle
from studio.runs.models import QUEUED, RUNNING, Run
from tests.studio.base import StudioTestCase
from tests.studio.fleet.test_gpu_leases import gpus
from tests.studio.people import person
from workers import gpu, launch

WORKER = "gpu@a"
RUNS_LIMIT = "waiting for its team's limits: team Alice's team has 1 of its 1 run at once running; it starts when one of them ends"


def pool(own: str | None, devices: tuple[str, ...] = ("0", "1", "2", "3")):
    """This pool process on a worker with `devices`, pinned to `own`."""
    return mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus(list(devices), own))


class QuotaCase(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        WorkerNode.record_start(WORKER, ["gpu"], gpus(0, 1, 2, 3), concurrency=4)

    def queued(self, team=None, processes: int = 1, name: str = "run") -> Run:
        """A queued run with a task message of its own (as lifecycle.enqueue leaves it)."""
        spec = {**self.experiment.spec_config(), "parallel": {"procs_per_node": processes}}
        return Run.objects.create(team=team or self.team, experiment=self.experiment, name=name, spec=spec,
                                  celery_task_id="sent")  # fmt: skip

    def take(self, run: Run, own: str) -> tuple[Run, list[str]] | None:
        """What the pool process pinned to GPU `own` does with `run`'s message."""
        with pool(own):
            return launch.claim_fairly(run, WORKER)

    def limit(self, team=None, **limits) -> TeamQuota:
        quota, _ = TeamQuota.objects.update_or_create(team=team or self.team, defaults=limits)
        return quota

    def waiting_for(self, run: Run) -> str:
        return Run.objects.get(pk=run.pk).waiting_for


class RunLimitTest(QuotaCase):
    def test_a_team_at_its_run_limit_queues_with_the_reason_while_another_teams_run_starts(self):
        self.limit(max_running_runs=1)
        first, second = self.queued(name="a-1"), self.queued(name="a-2")
        theirs = self.queued(team=self.other_team, name="theirs")
        self.assertEqual(self.take(first, "0"), (first, ["0"]))

        # The pool process took alice's second run's message: her team is at its limit, charlie's run starts.
        started, devices = self.take(second, "1")
        self.assertEqual((started.pk, devices), (theirs.pk, ["1"]))
        self.assertEqual(Run.objects.get(pk=theirs.pk).state, RUNNING)
        second.refresh_from_db()
        self.assertEqual((second.state, second.waiting_for), (QUEUED, RUNS_LIMIT))
        self.assertNotEqual(second.celery_task_id, "sent")  # its message started another run: it got a new one

        # The reason in words, where her team reads it: the API and the run page.
        self.assertEqual(self.client_for(self.carol).get(f"/api/runs/{second.pk}/").json()["waiting_for"], RUNS_LIMIT)
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{second.pk}/").content.decode().replace("&#x27;", "'")
        self.assertIn(RUNS_LIMIT, page)

        # Its own message again, nothing else queued: it goes back to the queue, still saying why.
        with self.assertRaises(launch.GpusBusy):
            self.take(second, "2")
        lifecycle.finish(first.pk, "succeeded")
        self.assertEqual(self.take(second, "2"), (Run.objects.get(pk=second.pk), ["2"]))
        self.assertEqual(self.waiting_for(second), "")

    def test_a_run_no_worker_has_tried_yet_says_its_teams_limit_on_its_page(self):
        self.limit(max_running_runs=1)
        self.take(self.queued(), "0")
        waiting = self.queued()
        self.assertEqual(self.client_for(self.bob).get(f"/api/runs/{waiting.pk}/").json()["queue"], RUNS_LIMIT)

    def test_a_run_that_was_cancelled_while_its_team_was_at_its_limit_is_not_started(self):
        self.limit(max_running_runs=1)
        self.take(self.queued(), "0")
        waiting = self.queued()
        with self.assertRaises(launch.GpusBusy):
            self.take(waiting, "1")
        lifecycle.request_cancel(waiting)
        self.assertIsNone(self.take(waiting, "1"))
        self.assertEqual(Run.objects.get(pk=waiting.pk).state, "cancelled")


class GpuLimitTest(QuotaCase):
    def test_the_gpus_limit_counts_the_gpus_the_teams_runs_hold(self):
        self.limit(max_gpus=2)
        pair = self.queued(processes=2, name="pair")
        self.assertEqual(self.take(pair, "0"), (pair, ["0", "1"]))
        one, theirs = self.queued(name="one"), self.queued(team=self.other_team, name="theirs")
        started, _ = self.take(one, "2")
        self.assertEqual(started.pk, theirs.pk)  # charlie's team has no limit
        self.assertEqual(self.waiting_for(one), "waiting for its team's limits: team Alice's team has 2 of its 2 GPUs in use")
        with self.assertRaises(launch.GpusBusy):
            self.take(one, "3")

        lifecycle.finish(pair.pk, "succeeded")
        self.limit(max_gpus=1)
        triple = self.queued(processes=3, name="triple")
        with self.assertRaises(launch.GpusBusy), pool("0"):
            launch.claim(triple, WORKER)
        self.assertEqual(self.waiting_for(triple), "waiting for its team's limits: this run needs 3 GPUs, more than "
                         "team Alice's team's limit of 1 GPU: it starts only if the limit is raised")  # fmt: skip
        self.assertEqual(self.take(one, "0")[0].pk, one.pk)  # one GPU fits the limit of one

    def test_a_run_on_a_machine_without_gpus_is_not_held_back_by_the_gpu_limits(self):
        self.limit(max_gpus=0, gpu_hours_per_day=0)
        run = self.queued()
        with mock.patch.object(gpu, "pool_gpus", return_value=gpu.PoolGpus()):
            self.assertEqual(launch.claim_fairly(run, WORKER), (run, []))


class GpuHoursLimitTest(QuotaCase):
    """Usage from studio.runs.usage.gpu_seconds_used: runs that ended with their GPU-seconds recorded."""

    NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)

    def used(self, hours: float, finished: datetime, team=None) -> Run:
        return self.make_run("succeeded", team=team or self.team, finished=finished, gpu_seconds=hours * 3600)

    def test_the_day_and_month_limits_count_what_the_team_used_since_the_day_and_the_month_began(self):
        self.used(2, self.NOW - timedelta(hours=4))  # today (UTC)
        self.used(5, datetime(2026, 3, 10, tzinfo=UTC))  # this month
        self.used(100, datetime(2026, 2, 27, tzinfo=UTC))  # last month: not counted
        self.used(50, self.NOW - timedelta(hours=1), team=self.other_team)  # another team's
        quota = self.limit(gpu_hours_per_day=2)
        self.assertEqual(quotas.refusal(quota, 1, now=self.NOW), "team Alice's team has used 2 of its 2 GPU-hours "
                         "today (UTC); it starts when the count starts again at 00:00 UTC")  # fmt: skip
        quota = self.limit(gpu_hours_per_day=2.5, gpu_hours_per_month=7)
        self.assertEqual(quotas.refusal(quota, 1, now=self.NOW), "team Alice's team has used 7 of its 7 GPU-hours "
                         "this month (UTC); it starts when the count starts again on the 1st (UTC)")  # fmt: skip
        quota = self.limit(gpu_hours_per_day=2.5, gpu_hours_per_month=7.5)
        self.assertEqual(quotas.refusal(quota, 1, now=self.NOW), "")
        self.assertEqual(quotas.refusal(quota, 0, now=self.NOW), "")  # a CPU run uses no GPU-hours
        words = {limit.name: limit.words for limit in quotas.summary(self.team, now=self.NOW)}
        self.assertEqual(words["gpu_hours_per_day"], "2 of 2.5 GPU-hours used today (UTC)")
        self.assertEqual(words["gpu_hours_per_month"], "7 of 7.5 GPU-hours used this month (UTC)")

    def test_a_team_past_its_gpu_hours_today_waits_while_another_teams_run_starts(self):
        self.used(3, timezone.now())
        self.limit(gpu_hours_per_day=3)
        mine, theirs = self.queued(), self.queued(team=self.other_team)
        self.assertEqual(self.take(mine, "0")[0].pk, theirs.pk)  # tried first (no run of its team runs), refused
        self.assertNotEqual(Run.objects.get(pk=mine.pk).celery_task_id, "sent")  # its message went: a new one
        self.assertTrue(self.waiting_for(mine).startswith(
            "waiting for its team's limits: team Alice's team has used 3 of its 3 GPU-hours today (UTC)"))  # fmt: skip


class FairnessTest(QuotaCase):
    """A sweep's trials are ordinary runs (lifecycle.create_run, enqueued when the launch commits): twenty of
    alice's team, queued before charlie's one run. The broker hands the messages out in the order they were
    sent; each test hands the pool process the oldest queued run's message, the sweep's, every time."""

    def trials(self, team, count: int, name: str) -> list[Run]:
        with self.captureOnCommitCallbacks(execute=True):
            runs = [lifecycle.create_run(team, self.experiment.spec_config(), name=f"{name}-{i}", experiment=self.experiment)
                    for i in range(count)]  # fmt: skip
        self.assertTrue(all(Run.objects.get(pk=run.pk).celery_task_id for run in runs))  # each has its message
        return runs

    def next_message(self) -> Run:
        return Run.objects.filter(state=QUEUED).order_by("pk").first()

    def test_twenty_queued_trials_do_not_starve_another_teams_one_run(self):
        sweep = self.trials(self.team, 20, "trial")
        [theirs] = self.trials(self.other_team, 1, "theirs")
        started = [self.take(self.next_message(), own)[0].pk for own in ("0", "1")]
        self.assertEqual(started, [sweep[0].pk, theirs.pk])  # second, not 21st

    def test_a_sweep_interleaves_with_another_teams_runs_as_places_free(self):
        sweep = self.trials(self.team, 20, "trial")
        theirs = self.trials(self.other_team, 3, "theirs")
        order = []
        for _ in range(8):  # one place: each start waits for the run before it to end
            run, _ = self.take(self.next_message(), "0")
            order.append("sweep" if run.team_id == self.team.pk else "theirs")
            lifecycle.finish(run.pk, "succeeded")
        self.assertEqual(order, ["sweep", "theirs"] * 3 + ["sweep", "sweep"])
        self.assertEqual(Run.objects.filter(pk__in=[r.pk for r in theirs], state="succeeded").count(), 3)
        self.assertEqual(Run.objects.filter(pk__in=[r.pk for r in sweep], state=QUEUED).count(), 15)

    def test_a_team_at_its_limit_lets_the_next_team_start_in_every_place(self):
        self.limit(max_running_runs=2)
        self.trials(self.team, 20, "trial")
        theirs = self.trials(self.other_team, 2, "theirs")
        started = [self.take(self.next_message(), own)[0] for own in ("0", "1", "2", "3")]
        self.assertEqual([run.team_id for run in started].count(self.team.pk), 2)
        self.assertEqual({run.pk for run in started if run.team_id != self.team.pk}, {r.pk for r in theirs})


class LimitsChangedTest(QuotaCase):
    def setUp(self) -> None:
        super().setUp()
        self.operator = get_user_model().objects.create_superuser("operator", "", "pw-operator-123")

    def test_limits_edited_in_the_admin_while_runs_wait_take_effect(self):
        quota = self.limit(max_running_runs=1)
        self.take(self.queued(), "0")
        waiting = self.queued()
        with self.assertRaises(launch.GpusBusy):
            self.take(waiting, "1")
        self.assertEqual(self.waiting_for(waiting), RUNS_LIMIT)

        self.client.force_login(self.operator)
        self.assertContains(self.client.get(f"/admin/fleet/teamquota/{quota.pk}/change/"), "Max running runs")
        form = {"team": self.team.pk, "max_running_runs": 2, "max_gpus": "", "gpu_hours_per_day": "",
                "gpu_hours_per_month": "", "note": "raised for the deadline"}  # fmt: skip
        response = self.client.post(f"/admin/fleet/teamquota/{quota.pk}/change/", form)
        self.assertEqual(response.status_code, 302, response.content[:2000])
        waiting.refresh_from_db()
        self.assertEqual(waiting.waiting_for, "")  # what it said is dropped at once; its page asks again
        self.assertEqual(waiting.events.filter(kind="status").order_by("-seq").first().payload["detail"],
                         "the team's limits were changed: tried again")  # fmt: skip
        self.assertTrue(self.client_for(self.bob).get(f"/api/runs/{waiting.pk}/").json()["queue"]
                        .startswith("waiting for a worker to take it"))  # fmt: skip
        self.assertEqual(self.take(waiting, "1")[0].pk, waiting.pk)  # its next try starts it

        # Lowered below what runs: the next run waits, and says the new limit.
        form["max_running_runs"] = 1
        self.client.post(f"/admin/fleet/teamquota/{quota.pk}/change/", form)
        later = self.queued()
        self.assertEqual(self.client_for(self.bob).get(f"/api/runs/{later.pk}/").json()["queue"],
                         "waiting for its team's limits: team Alice's team has 2 of its 1 run at once running; "
                         "it starts when one of them ends")  # fmt: skip

    def test_only_the_operator_edits_limits(self):
        self.client.force_login(self.alice)  # owns her team, but is not the operator
        self.assertEqual(self.client.get("/admin/fleet/teamquota/add/").status_code, 302)  # to the admin's sign-in
        self.assertEqual(self.client_for(self.alice).post("/api/fleet/quotas/", {}).status_code, 405)


class TeamLimitsShownTest(QuotaCase):
    def test_each_team_sees_its_own_limits_and_what_it_uses_read_only(self):
        self.limit(max_running_runs=4, max_gpus=2, note="shared lab budget")
        self.take(self.queued(processes=2), "0")
        self.limit(team=self.other_team, max_running_runs=9)
        [mine] = self.client_for(self.carol).get("/api/fleet/quotas/").json()
        self.assertEqual((mine["team"], mine["note"]), ("Alice's team", "shared lab budget"))
        by_name = {limit["name"]: limit for limit in mine["limits"]}
        self.assertEqual((by_name["max_running_runs"]["limit"], by_name["max_running_runs"]["used"]), (4, 1))
        self.assertEqual(by_name["max_gpus"]["words"], "2 of 2 GPUs in use")
        self.assertEqual(by_name["gpu_hours_per_day"]["words"], "no limit on GPU-hours today")
        [theirs] = self.client_for(self.charlie).get("/api/fleet/quotas/").json()
        self.assertEqual((theirs["team"], theirs["limits"][0]["words"]), ("Charlie's team", "0 of 9 runs running"))
        self.assertEqual(self.client_for(person("dana")).get("/api/fleet/quotas/").status_code, 403)

        self.client.force_login(self.carol)
        page = self.client.get("/fleet/").content.decode().replace("&#x27;", "'")
        self.assertIn('<td data-limit="max_gpus">2 of 2 GPUs in use</td>', page)
        self.assertIn("shared lab budget", page)
        self.assertNotIn("Charlie's team", page)
