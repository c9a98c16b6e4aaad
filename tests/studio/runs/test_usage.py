"""What runs used (issue 41, studio.runs.usage): each attempt recorded once, the GPU-seconds a quota reads, a team's
sums per user, per experiment and per month checked by hand, their cost at the operator's prices, and who sees it.

Who may see what: alice (owner), bob (editor) and carol (viewer) see Alice's team's usage; charlie (outsider) gets
404; a share link's reader gets none of it (the run page leaves it out, the API refuses the team's usage)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.test import override_settings
from django.utils import timezone

from studio.experiments.models import Experiment
from studio.fleet.models import GpuLease
from studio.runs import usage
from studio.runs.models import Run
from studio.runs.team_usage import Period, team_usage
from studio.sharing.models import ShareLink
from tests.studio.base import StudioTestCase

CPU2 = [{"rank": 0, "device": "cpu"}, {"rank": 1, "device": "cpu"}]
GPU1 = [{"rank": 0, "device": "gpu 3"}]


def at(year: int, month: int, day: int = 10) -> datetime:
    return datetime(year, month, day, 12, tzinfo=UTC)


class RecordTest(StudioTestCase):
    def test_it_sums_the_processes_of_an_attempt_and_rewrites_it_as_the_run_goes(self):
        run = self.make_run("running")
        usage.record(run.pk, 0, CPU2, 10.0, tokens_generated=100, tokens_trained=300, final=False)
        usage.record(run.pk, 0, CPU2, 25.5, tokens_generated=250, tokens_trained=700, final=False)
        run.refresh_from_db()
        # the second write replaces the first: two processes × 25.5 s, not 2 × (10 + 25.5)
        self.assertEqual((run.device_seconds, run.gpu_seconds), (51.0, 0.0))
        self.assertEqual((run.tokens_generated, run.tokens_trained), (250, 700))
        self.assertEqual([p["seconds"] for p in run.usage["attempts"]["0"]["processes"]], [25.5, 25.5])
        self.assertFalse(usage.of_run(run)["final"])

    def test_a_restart_is_a_new_attempt_counted_once_beside_the_first(self):
        run = self.make_run("running")
        usage.record(run.pk, 0, GPU1, 100.0, tokens_generated=1000, tokens_trained=3000, final=True)
        usage.record(run.pk, 1, GPU1, 40.0, tokens_generated=400, tokens_trained=1200, final=False)
        usage.record(run.pk, 1, GPU1, 60.0, tokens_generated=600, tokens_trained=1800, final=True)
        # a process of attempt 0 that hung and goes on cannot add to it once it was final
        usage.record(run.pk, 0, GPU1, 500.0, tokens_generated=9999, tokens_trained=9999, final=False)
        run.refresh_from_db()
        self.assertEqual((run.device_seconds, run.gpu_seconds), (160.0, 160.0))
        self.assertEqual((run.tokens_generated, run.tokens_trained), (1600, 4800))
        shown = usage.of_run(run)
        self.assertEqual((shown["attempts"], shown["final"], shown["cpu_seconds"]), (2, True, 0.0))

    def test_a_share_of_a_shared_gpu_counts_its_part(self):
        run = self.make_run("running")
        procs = usage.processes({}, "train", ["0"], part=0.25)
        self.assertEqual(procs, [{"rank": 0, "device": "gpu 0", "share": 0.25}])
        usage.record(run.pk, 0, procs, 80.0, tokens_generated=0, tokens_trained=0, final=True)
        run.refresh_from_db()
        self.assertEqual((run.device_seconds, run.gpu_seconds), (20.0, 20.0))

    def test_a_record_for_a_run_that_is_gone_writes_nothing(self):
        usage.record(10**9, 0, CPU2, 5.0, tokens_generated=1, tokens_trained=1, final=True)  # no error either


class ProcessesTest(StudioTestCase):
    def test_the_processes_follow_the_runs_placement(self):
        two = {"parallel": {"procs_per_node": 2}}
        self.assertEqual(usage.processes({}, "train", []), [{"rank": 0, "device": "cpu"}])
        self.assertEqual(usage.processes(two, "train", []), CPU2)
        self.assertEqual(usage.processes(two, "train", ["2", "5"]),
                         [{"rank": 0, "device": "gpu 2"}, {"rank": 1, "device": "gpu 5"}])  # fmt: skip
        self.assertEqual(usage.processes(two, "eval", []), [{"rank": 0, "device": "cpu"}])  # evaluations: one process
        ray = usage.processes({"parallel": {"procs_per_node": 2, "nodes": 2}}, "train", [])
        self.assertEqual([p["device"] for p in ray], [usage.RAY_DEVICE] * 4)


class GpuSecondsUsedTest(StudioTestCase):
    def test_it_counts_ended_attempts_since_then_and_running_ones_up_to_now(self):
        since = timezone.now() - timedelta(hours=1)
        old = self.make_run("succeeded", finished=since - timedelta(minutes=5))
        usage.record(old.pk, 0, GPU1, 999.0, tokens_generated=0, tokens_trained=0, final=True)
        Run.objects.filter(pk=old.pk).update(usage=_dated(old, since - timedelta(minutes=5)))
        done = self.make_run("succeeded", finished=timezone.now())
        usage.record(done.pk, 0, GPU1 * 2, 30.0, tokens_generated=0, tokens_trained=0, final=True)  # 2 GPUs × 30 s
        cpu = self.make_run("succeeded", finished=timezone.now())
        usage.record(cpu.pk, 0, CPU2, 500.0, tokens_generated=0, tokens_trained=0, final=True)  # no GPU time
        running = self.make_run("running", restarts=1)
        usage.record(running.pk, 0, GPU1, 7.0, tokens_generated=0, tokens_trained=0, final=True)  # its first attempt
        usage.record(running.pk, 1, GPU1, 1.0, tokens_generated=0, tokens_trained=0, final=False)  # from its leases
        GpuLease.objects.create(worker="w", device="0", run=running, taken=timezone.now() - timedelta(seconds=120))
        GpuLease.objects.create(worker="w", device="1", run=running, taken=since - timedelta(hours=5))
        shared = self.make_run("running")
        GpuLease.objects.create(worker="w", device="2", run=shared, taken=timezone.now() - timedelta(seconds=400),
                                shares=4)  # fmt: skip
        other = Run.objects.create(team=self.other_team, name="theirs", spec={}, state="succeeded",
                                   finished=timezone.now(), gpu_seconds=10_000.0)  # fmt: skip
        self.assertTrue(other.pk)
        used = usage.gpu_seconds_used(self.team, since)
        # 60 (done) + 7 (running's first attempt) + 120 + 3600 (its two leases, the older one from `since`) + 100
        self.assertAlmostEqual(used, 60 + 7 + 120 + 3600 + 400 / 4, delta=2.0)


def _dated(run: Run, when: datetime) -> dict:
    run.refresh_from_db()
    attempts = {n: {**a, "at": when.isoformat()} for n, a in run.usage["attempts"].items()}
    return {**run.usage, "attempts": attempts}


class TeamUsageTest(StudioTestCase):
    """Fixtures: two users, two experiments (and a run whose experiment was deleted), three months."""

    def setUp(self) -> None:
        super().setUp()
        self.exp2 = Experiment.objects.create(team=self.team, name="Exp two", dataset=self.dataset, rubric=self.rubric,
                                              model_path="/models/tiny", config={}, created_by=self.bob)  # fmt: skip
        rows = [  # (who, experiment, month, device_seconds, gpu_seconds, generated, trained)
            (self.alice, self.experiment, at(2026, 9), 3600.0, 3600.0, 1000, 3000),
            (self.alice, self.experiment, at(2026, 10), 7200.0, 0.0, 500, 1500),
            (self.bob, self.experiment, at(2026, 10, 31), 1800.0, 1800.0, 200, 600),
            (self.bob, self.exp2, at(2026, 11, 1), 900.0, 900.0, 100, 300),
            (self.bob, None, at(2026, 11), 100.0, 0.0, 10, 30),
        ]
        for who, experiment, created, device, gpu, generated, trained in rows:
            run = Run.objects.create(team=self.team, experiment=experiment, name="r", spec={}, state="succeeded",
                                     created_by=who, device_seconds=device, gpu_seconds=gpu,
                                     tokens_generated=generated, tokens_trained=trained)  # fmt: skip
            Run.objects.filter(pk=run.pk).update(created=created)  # auto_now_add: set after
        Run.objects.create(team=self.other_team, name="theirs", spec={}, device_seconds=1e6, gpu_seconds=1e6)

    def test_the_sums_per_user_experiment_and_month_are_the_hand_counted_ones(self):
        got = team_usage(self.team, prices=usage.Prices(2.0, 0.1, "EUR"))
        # in all: device 3600+7200+1800+900+100 = 13600 s, GPU 3600+1800+900 = 6300 s, CPU 7300 s
        total = got["total"]
        self.assertEqual((total["runs"], total["device_seconds"], total["gpu_seconds"], total["cpu_seconds"]),
                         (5, 13600.0, 6300.0, 7300.0))  # fmt: skip
        self.assertEqual((total["tokens_generated"], total["tokens_trained"]), (1810, 5430))
        # cost: 6300 s = 1.75 GPU-h × 2.0 + 7300 s = 2.0278 CPU-h × 0.1
        self.assertAlmostEqual(total["cost"], 1.75 * 2.0 + 7300 / 3600 * 0.1)
        users = {r["label"]: (r["runs"], r["device_seconds"], r["gpu_seconds"], r["tokens_generated"])
                 for r in got["by_user"]}  # fmt: skip
        self.assertEqual(users, {"alice": (2, 10800.0, 3600.0, 1500), "bob": (3, 2800.0, 2700.0, 310)})
        self.assertEqual([r["label"] for r in got["by_user"]], ["alice", "bob"])  # the largest first
        experiments = {r["label"]: (r["experiment"], r["runs"], r["device_seconds"], r["tokens_trained"])
                       for r in got["by_experiment"]}  # fmt: skip
        self.assertEqual(experiments, {"Exp": (self.experiment.pk, 3, 12600.0, 5100),
                                       "Exp two": (self.exp2.pk, 1, 900.0, 300),
                                       "(no experiment)": (None, 1, 100.0, 30)})  # fmt: skip
        months = [(r["label"], r["runs"], r["device_seconds"], r["gpu_seconds"]) for r in got["by_month"]]
        self.assertEqual(months, [("2026-09", 1, 3600.0, 3600.0), ("2026-10", 2, 9000.0, 1800.0),
                                  ("2026-11", 2, 1000.0, 900.0)])  # fmt: skip
        # every breakdown sums to the total
        for rows in (got["by_user"], got["by_experiment"], got["by_month"]):
            self.assertEqual(sum(r["device_seconds"] for r in rows), total["device_seconds"])
            self.assertAlmostEqual(sum(r["cost"] for r in rows), total["cost"])

    def test_a_period_counts_the_runs_launched_in_its_months(self):
        got = team_usage(self.team, Period.from_query({"from": "2026-10", "to": "2026-10"}))
        self.assertEqual((got["total"]["runs"], got["total"]["device_seconds"]), (2, 9000.0))
        self.assertEqual(got["period"], {"from": "2026-10", "to": "2026-10"})
        self.assertEqual(team_usage(self.team, Period.from_query({"from": "2026-11"}))["total"]["runs"], 2)

    def test_without_prices_no_cost_is_given(self):
        got = team_usage(self.team, prices=usage.Prices(0.0, 0.0, "USD"))
        self.assertIsNone(got["total"]["cost"])
        self.assertIsNone(got["prices"]["currency"])

    @override_settings(GPU_HOUR_PRICE=3.0, CPU_HOUR_PRICE=0.0, PRICE_CURRENCY="USD")
    def test_the_api_gives_the_same_numbers_to_every_member_and_404_to_outsiders(self):
        url = f"/api/teams/{self.team.pk}/usage/?from=2026-10"
        for who in (self.alice, self.bob, self.carol):
            answer = self.client_for(who).get(url)
            self.assertEqual(answer.status_code, 200)
            self.assertEqual(answer.json()["total"]["device_seconds"], 9000.0 + 1000.0)
            self.assertAlmostEqual(answer.json()["total"]["cost"], (1800 + 900) / 3600 * 3.0)
        self.assertEqual(self.client_for(self.charlie).get(url).status_code, 404)
        self.assertEqual(self.client.get(url).status_code, 403)

    def test_a_bad_month_is_refused_naming_it(self):
        client = self.client_for(self.alice)
        for query, field in (("from=2026-13", "from"), ("to=last+month", "to"), ("from=2026-11&to=2026-10", "to")):
            answer = client.get(f"/api/teams/{self.team.pk}/usage/?{query}")
            self.assertEqual(answer.status_code, 400, query)
            self.assertIn(field, answer.json(), query)
        self.client.force_login(self.alice)
        page = self.client.get(f"/teams/{self.team.pk}/usage/?from=2026-1")
        self.assertEqual(page.status_code, 400)
        self.assertContains(page, "must be a month as YYYY-MM", status_code=400)

    @override_settings(GPU_HOUR_PRICE=2.0, CPU_HOUR_PRICE=0.1, PRICE_CURRENCY="EUR")
    def test_the_page_shows_the_sums_to_members(self):
        self.client.force_login(self.carol)
        page = self.client.get(f"/teams/{self.team.pk}/usage/")
        self.assertEqual(page.status_code, 200)
        html = page.content.decode()
        self.assertIn("<span data-total-device>3.78 h</span>", html)  # 13600 s
        self.assertIn("<span data-total-generated>1,810</span>", html)
        self.assertIn("<span data-total-cost>3.70 EUR</span>", html)  # 3.5 + 0.2028
        self.assertIn('data-usage-row="2026-10"', html)
        self.client.force_login(self.charlie)
        self.assertEqual(self.client.get(f"/teams/{self.team.pk}/usage/").status_code, 404)


class RunUsageShownTest(StudioTestCase):
    @override_settings(GPU_HOUR_PRICE=4.0, CPU_HOUR_PRICE=0.0, PRICE_CURRENCY="USD")
    def test_members_see_a_runs_usage_and_cost_and_a_share_links_reader_does_not(self):
        run = self.make_run("succeeded", started=timezone.now(), finished=timezone.now())
        usage.record(run.pk, 0, GPU1, 1800.0, tokens_generated=12345, tokens_trained=40000, final=True)
        answer = self.client_for(self.carol).get(f"/api/runs/{run.pk}/").json()["usage"]
        self.assertEqual((answer["gpu_seconds"], answer["tokens_generated"], answer["cost"], answer["currency"]),
                         (1800.0, 12345, 2.0, "USD"))  # fmt: skip
        self.client.force_login(self.bob)
        page = self.client.get(f"/runs/{run.pk}/").content.decode()
        self.assertIn("<span data-usage-cost>2.00 USD</span>", page)
        self.assertIn("<span data-usage-generated>12,345</span>", page)
        link = ShareLink.objects.create(run=run, created_by=self.alice)
        self.client.logout()
        shared = self.client.get(f"/share/{link.token}/").content.decode()
        self.assertIn(run.name, shared)
        self.assertNotIn("data-run-usage", shared)
        self.assertNotIn("USD", shared)


class EstimateTest(StudioTestCase):
    """The experiment's settings (tests/studio/base.py: total_steps 5, the schema's defaults otherwise) bound the
    tokens; its earlier runs give the time and the tokens seen."""

    def past_run(self, steps: int, seconds_per_process: float, procs: list, generated: int, trained: int) -> Run:
        run = self.make_run("succeeded", last_step=steps, finished=timezone.now())
        usage.record(run.pk, 0, procs, seconds_per_process, tokens_generated=generated, tokens_trained=trained,
                     final=True)  # fmt: skip
        return run

    def test_without_earlier_runs_it_gives_the_settings_bounds_and_no_time(self):
        from studio.runs.estimates import estimate, step_cost

        bound = step_cost(self.experiment.spec_config())
        got = estimate(self.experiment, runs=3)
        self.assertEqual((got.runs, got.steps, got.processes, got.earlier_runs), (3, 5, 1, 0))
        self.assertEqual(got.max_tokens_generated, bound.generated * 5 * 3)  # the edit page's StepCost, × steps × runs
        self.assertEqual(got.max_tokens_trained, bound.trained * 5 * 3)
        self.assertIsNone(got.device_seconds)
        self.assertIsNone(got.cost)
        self.assertIn("no earlier run", got.basis)

    def test_earlier_runs_give_a_load_time_a_rate_per_step_and_the_tokens_seen(self):
        from studio.runs.estimates import estimate

        # one process: 10 s of loading + 4 s a step; tokens 100 generated and 300 trained a step
        self.past_run(2, 10 + 4 * 2, GPU1, 200, 600)
        self.past_run(10, 10 + 4 * 10, GPU1, 1000, 3000)
        # two CPU processes of 30 s each for 5 steps (per process 10 + 4 × 5): the same device, as time per process
        self.past_run(5, 30, CPU2, 500, 1500)
        got = estimate(self.experiment, runs=4, prices=usage.Prices(2.0, 0.0, "EUR"))
        self.assertEqual(got.earlier_runs, 3)
        # 5 steps: 10 + 4 × 5 = 30 s per process, one process, 4 runs
        self.assertAlmostEqual(got.device_seconds, 30 * 4)
        # GPU share of the history: (18 + 50) GPU-s of 18 + 50 + 60 device-s
        self.assertAlmostEqual(got.gpu_seconds, 120 * 68 / 128)
        self.assertAlmostEqual(got.cost, 120 * 68 / 128 / 3600 * 2.0)
        self.assertEqual((got.tokens_generated, got.tokens_trained), (100 * 5 * 4, 300 * 5 * 4))
        self.assertEqual(got.currency, "EUR")
        # overrides as a sweep's trial gives them: 20 steps, 2 processes each
        more = estimate(self.experiment, overrides={"optim": {"total_steps": 20}, "parallel": {"procs_per_node": 2}})
        self.assertEqual((more.steps, more.processes), (20, 2))
        self.assertAlmostEqual(more.device_seconds, (10 + 4 * 20) * 2)

    def test_the_tokens_seen_never_pass_the_settings_bound(self):
        from studio.runs.estimates import estimate, step_cost

        bound = step_cost(self.experiment.spec_config())
        self.past_run(1, 5.0, CPU2[:1], bound.generated * 10, bound.trained * 10)  # settings since made smaller
        got = estimate(self.experiment)
        self.assertEqual((got.tokens_generated, got.tokens_trained), (bound.generated * 5, bound.trained * 5))

    def test_the_api_and_the_page_give_it_to_members(self):
        self.past_run(5, 25.0, GPU1, 500, 1500)
        answer = self.client_for(self.carol).get(f"/api/experiments/{self.experiment.pk}/estimate/?runs=12")
        self.assertEqual(answer.status_code, 200)
        self.assertEqual((answer.json()["runs"], answer.json()["device_seconds"]), (12, 25.0 * 12))
        self.assertEqual(answer.json()["earlier_runs"], 1)
        bad = self.client_for(self.carol).get(f"/api/experiments/{self.experiment.pk}/estimate/?runs=0")
        self.assertEqual((bad.status_code, list(bad.json())), (400, ["runs"]))
        outsider = self.client_for(self.charlie).get(f"/api/experiments/{self.experiment.pk}/estimate/")
        self.assertEqual(outsider.status_code, 404)
        self.client.force_login(self.bob)
        page = self.client.get(f"/experiments/{self.experiment.pk}/?estimate_runs=3").content.decode()
        self.assertIn("<b data-estimate-device>1.2 min</b>", page)  # 25 s × 3
        self.assertIn("1 earlier run of this experiment", page)
        page = self.client.get(f"/experiments/{self.experiment.pk}/?estimate_runs=lots").content.decode()
        self.assertIn("a whole number from 1 to 1000, got &#x27;lots&#x27;", page)


class RunsListTest(StudioTestCase):
    @override_settings(GPU_HOUR_PRICE=3600.0, CPU_HOUR_PRICE=0.0, PRICE_CURRENCY="USD")  # 1 USD per GPU-second
    def test_the_runs_list_says_what_each_run_used_and_sorts_by_it(self):
        small = self.make_run("succeeded", name="small")
        big = self.make_run("succeeded", name="big")
        usage.record(small.pk, 0, GPU1, 2.0, tokens_generated=10, tokens_trained=30, final=True)
        usage.record(big.pk, 0, GPU1, 90.0, tokens_generated=5000, tokens_trained=9000, final=True)
        untouched = self.make_run("queued", name="waiting")
        self.client.force_login(self.carol)
        html = self.client.get("/runs/?col=run:gpu_seconds&sort=-run:gpu_seconds").content.decode()
        self.assertIn("1.5 min GPU · 5,000 tokens · 90.00 USD", html)
        self.assertIn("2.0 s GPU · 10 tokens · 2.00 USD", html)
        self.assertLess(html.index(f'data-run-row="{big.pk}"'), html.index(f'data-run-row="{small.pk}"'))
        row = html[html.index(f'data-run-row="{untouched.pk}"') :]
        self.assertNotIn("data-run-used", row[: row.index("</tr>")])  # nothing used yet: nothing said
