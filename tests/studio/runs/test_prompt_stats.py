"""A run's per-prompt statistics: written per step (studio.runs.prompt_stats), carried into a resumed
run, and listed by the prompts view's API (studio.runs.prompt_stat_query) to whoever may read the run.

alice owns the run's team, bob edits and carol views in it, charlie is an outsider (404), and a
share link's holder reads without an account (see tests/studio/people.py)."""

from __future__ import annotations

from studio.runs import prompt_stats
from studio.runs.models import Checkpoint, PromptStat, Run
from studio.sharing.models import ShareLink
from tests.studio.base import StudioTestCase
from tests.studio.records import make_rollout
from trainers.curriculum.stats import PromptBook


def stat(
    pid: str, step: int, passed: int, samples: int, alpha: float, beta: float, status: str, draws: int = 1
) -> dict:
    """A statistic as the trainer reports it: a Beta(alpha, beta) posterior of the pass rate."""
    n = alpha + beta
    return {"prompt_id": pid, "draws": draws, "alpha": alpha, "beta": beta, "pass_rate": alpha / n,
            "pass_rate_std": (alpha * beta / (n * n * (n + 1))) ** 0.5, "last_step": step, "status": status,
            "step_passed": passed, "step_samples": samples}  # fmt: skip


class RecordTest(StudioTestCase):
    def test_a_step_creates_rows_and_the_next_updates_totals_and_appends_its_outcome(self):
        run = self.make_run("running")
        self.assertEqual(prompt_stats.record(run.pk, 1, [stat("a", 1, 3, 4, 4, 2, "learnable"),
                                                         stat("b", 1, 0, 4, 1, 5, "never_solved")]), 2)  # fmt: skip
        prompt_stats.record(run.pk, 2, [stat("a", 2, 4, 4, 8, 2, "learnable", draws=2)])
        a, b = PromptStat.objects.filter(run=run).order_by("prompt_id")
        self.assertEqual((a.draws, a.alpha, a.beta, a.last_step, a.history), (2, 8.0, 2.0, 2, [[1, 3, 4], [2, 4, 4]]))
        self.assertAlmostEqual(a.pass_rate, 0.8)  # 8 / (8 + 2)
        self.assertAlmostEqual(a.pass_rate_std, (16 / (100 * 11)) ** 0.5)  # sqrt(ab / ((a+b)^2 (a+b+1)))
        self.assertEqual((b.status, b.last_step, b.history), ("never_solved", 1, [[1, 0, 4]]))

    def test_a_step_reported_again_replaces_its_entry_instead_of_adding_one(self):
        run = self.make_run("running")
        prompt_stats.record(run.pk, 1, [stat("a", 1, 1, 4, 2, 4, "learnable")])
        prompt_stats.record(run.pk, 2, [stat("a", 2, 1, 4, 3, 7, "learnable")])
        prompt_stats.record(run.pk, 2, [stat("a", 2, 2, 4, 4, 6, "learnable")])
        self.assertEqual(PromptStat.objects.get(run=run).history, [[1, 1, 4], [2, 2, 4]])

    def test_the_history_keeps_its_newest_entries(self):
        run = self.make_run("running")
        PromptStat.objects.create(run=run, prompt_id="a", alpha=1, beta=1, pass_rate=0.5, pass_rate_std=0.29,
                                  last_step=0, history=[[s, 1, 2] for s in range(-prompt_stats.HISTORY_MAX + 1, 1)])  # fmt: skip
        prompt_stats.record(run.pk, 1, [stat("a", 1, 2, 2, 3, 1, "learnable")])
        history = PromptStat.objects.get(run=run).history
        self.assertEqual(
            (len(history), history[0][0], history[-1]),
            (prompt_stats.HISTORY_MAX, -prompt_stats.HISTORY_MAX + 2, [1, 2, 2]),
        )

    def test_a_bad_statistic_is_refused_with_the_prompt_and_field_named_and_nothing_written(self):
        run = self.make_run("running")
        with self.assertRaisesRegex(prompt_stats.PromptStatError, r"prompt 'a'.*status must be one of .*'easy'"):
            prompt_stats.record(run.pk, 1, [stat("b", 1, 1, 2, 2, 2, "learnable"), stat("a", 1, 1, 2, 2, 2, "easy")])
        missing = stat("c", 1, 1, 2, 2, 2, "learnable")
        del missing["step_samples"]
        with self.assertRaisesRegex(prompt_stats.PromptStatError, r"prompt 'c'.*'step_samples'"):
            prompt_stats.record(run.pk, 1, [missing])
        self.assertFalse(PromptStat.objects.filter(run=run).exists())


class ResumeTest(StudioTestCase):
    def test_a_resumed_run_starts_with_its_sources_statistics_as_they_stood_at_the_checkpoint(self):
        source = self.make_run("failed")
        prompt_stats.record(source.pk, 1, [stat("a", 1, 1, 4, 2, 4, "learnable"), stat("b", 1, 4, 4, 5, 1, "solved")])
        prompt_stats.record(source.pk, 2, [stat("b", 2, 4, 4, 9, 1, "solved", draws=2)])
        prompt_stats.record(source.pk, 3, [stat("a", 3, 2, 4, 4, 6, "learnable", draws=2),
                                           stat("c", 3, 0, 4, 1, 5, "never_solved")])  # fmt: skip
        Checkpoint.objects.create(run=source, step=2, path="/ck/2")  # the worker died during step 3
        response = self.client_for(self.bob).post(f"/api/runs/{source.pk}/resume/")
        self.assertEqual(response.status_code, 201)
        resumed = Run.objects.get(pk=response.json()["id"])
        rows = {r.prompt_id: r for r in PromptStat.objects.filter(run=resumed)}
        self.assertEqual(set(rows), {"a", "b"})  # c was first drawn in step 3, after the checkpoint
        self.assertEqual((rows["b"].history, rows["b"].alpha, rows["b"].draws), ([[1, 4, 4], [2, 4, 4]], 9.0, 2))
        self.assertEqual((rows["a"].history, rows["a"].last_step), ([[1, 1, 4]], 1))
        self.assertEqual(PromptStat.objects.filter(run=source).count(), 3)  # the source keeps its own


class PromptsApiTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.run = self.make_run("running")
        # (prompt, pass rate alpha/(alpha+beta), draws, last step, status): every sort key tells them apart.
        prompt_stats.record(self.run.pk, 1, [
            stat("p1", 1, 4, 4, 9, 1, "solved", draws=3),        # 0.9,  std 0.0905
            stat("p2", 1, 2, 4, 3, 3, "learnable", draws=1),     # 0.5,  std 0.189
            stat("p3", 1, 0, 4, 1, 9, "never_solved", draws=4),  # 0.1,  std 0.0905
        ])  # fmt: skip
        prompt_stats.record(self.run.pk, 2, [stat("p4", 2, 1, 4, 2, 3, "learnable", draws=2)])  # 0.4, std 0.2
        for step, pid in ((1, "p1"), (1, "p2"), (2, "p4")):
            make_rollout(self.run, step=step, sample_index=0, prompt_id=pid, prompt=f"Question {pid}?")

    def listing(self, user=None, **params):
        client = self.client_for(user or self.alice)
        return client.get(f"/api/runs/{self.run.pk}/prompts/", params)

    def ids(self, **params) -> list[str]:
        """Every prompt id the pages list, following next_cursor two rows at a time."""
        ids, cursor = [], None
        while True:
            body = self.listing(**params, limit=2, **({"cursor": cursor} if cursor else {})).json()
            ids += [r["prompt_id"] for r in body["results"]]
            cursor = body["next_cursor"]
            if not cursor:
                return ids

    def test_each_order_sorts_every_page_with_ties_in_row_order(self):
        self.assertEqual(self.ids(order="pass_rate"), ["p3", "p4", "p2", "p1"])
        self.assertEqual(self.ids(order="-pass_rate"), ["p1", "p2", "p4", "p3"])
        self.assertEqual(self.ids(order="draws"), ["p2", "p4", "p1", "p3"])
        self.assertEqual(self.ids(order="-draws"), ["p3", "p1", "p4", "p2"])
        self.assertEqual(self.ids(order="-last_step"), ["p4", "p3", "p2", "p1"])
        self.assertEqual(self.ids(), ["p4", "p3", "p2", "p1"])  # the default: last seen, newest first
        self.assertEqual(self.ids(order="-pass_rate_std"), ["p4", "p2", "p3", "p1"])  # p1, p3 tie at 0.0905
        self.assertEqual(self.ids(order="pass_rate_std"), ["p1", "p3", "p2", "p4"])

    def test_the_status_filter_keeps_its_status_and_the_counts_cover_the_whole_run(self):
        body = self.listing(status="learnable").json()
        self.assertEqual([r["prompt_id"] for r in body["results"]], ["p4", "p2"])
        self.assertEqual(body["counts"], {"unseen": 0, "solved": 1, "learnable": 2, "never_solved": 1})
        self.assertEqual(self.ids(status="never_solved", order="pass_rate"), ["p3"])

    def test_a_row_carries_its_prompts_preview_where_rollouts_were_stored_and_its_history(self):
        rows = {r["prompt_id"]: r for r in self.listing().json()["results"]}
        self.assertEqual(rows["p1"]["preview"], "Question p1?")
        self.assertEqual(rows["p3"]["preview"], "")  # no rollout of p3 stored: the view shows its id
        self.assertEqual(
            (rows["p4"]["history"], rows["p4"]["status"], rows["p4"]["draws"]), ([[2, 1, 4]], "learnable", 2)
        )
        self.assertAlmostEqual(rows["p2"]["pass_rate_std"], (9 / (36 * 7)) ** 0.5)

    def test_one_prompt_has_its_whole_history(self):
        prompt_stats.record(self.run.pk, 5, [stat("p2", 5, 4, 4, 7, 3, "learnable", draws=2)])
        body = self.client_for(self.carol).get(f"/api/runs/{self.run.pk}/prompts/p2/").json()
        self.assertEqual((body["history"], body["last_step"], body["alpha"]), ([[1, 2, 4], [5, 4, 4]], 5, 7.0))
        self.assertEqual(self.client_for(self.carol).get(f"/api/runs/{self.run.pk}/prompts/nope/").status_code, 404)

    def test_team_members_read_outsiders_get_404_and_a_live_share_link_reads(self):
        for user in (self.alice, self.bob, self.carol):
            self.assertEqual(len(self.listing(user).json()["results"]), 4)
        self.assertEqual(self.listing(self.charlie).status_code, 404)
        outsider = self.client_for(self.charlie)
        self.assertEqual(outsider.get(f"/api/runs/{self.run.pk}/prompts/p1/").status_code, 404)
        guest = self.client_class()
        self.assertIn(guest.get(f"/api/runs/{self.run.pk}/prompts/").status_code, (401, 403))
        link = ShareLink.objects.create(run=self.run, created_by=self.alice)
        self.assertEqual(
            len(guest.get(f"/api/runs/{self.run.pk}/prompts/", {"share": link.token}).json()["results"]), 4
        )
        self.assertEqual(guest.get(f"/api/runs/{self.run.pk}/prompts/p1/", {"share": link.token}).status_code, 200)
        link.revoke()
        self.assertEqual(guest.get(f"/api/runs/{self.run.pk}/prompts/", {"share": link.token}).status_code, 404)

    def test_bad_parameters_are_named(self):
        self.assertIn("order", self.listing(order="best").json())
        self.assertIn("status", self.listing(status="easy").json())
        self.assertIn("cursor", self.listing(cursor="nonsense").json())

    def test_the_pages_open_for_members_and_share_links_only(self):
        self.client.force_login(self.carol)
        page = self.client.get(f"/runs/{self.run.pk}/prompts/")
        self.assertContains(page, "prompts-config")
        self.assertContains(self.client.get(f"/runs/{self.run.pk}/"), f"/runs/{self.run.pk}/prompts/")
        self.client.force_login(self.charlie)
        self.assertEqual(self.client.get(f"/runs/{self.run.pk}/prompts/").status_code, 404)
        link = ShareLink.objects.create(run=self.run, created_by=self.alice)
        self.client.logout()
        self.assertContains(self.client.get(f"/share/{link.token}/prompts/"), f'"share_token": "{link.token}"')
        link.revoke()
        self.assertEqual(self.client.get(f"/share/{link.token}/prompts/").status_code, 404)


class TrainerContractTest(StudioTestCase):
    def test_the_trainers_own_records_round_trip_with_a_row_drawn_twice_in_a_step(self):
        run = self.make_run("running")
        book = PromptBook(["a", "b"])
        # Step 1 draws a twice (groups "a" and "a@2") and b once; each group reports its statistic.
        reported = [book.observe(1, "a", [True, False]).event(), book.observe(1, "a", [True, True]).event(),
                    book.observe(1, "b", [False, False]).event()]  # fmt: skip
        prompt_stats.record(run.pk, 1, reported)
        a, b = PromptStat.objects.filter(run=run).order_by("prompt_id")
        # a: Beta(1 + 3 passes, 1 + 1 failure) over its two groups, both in the step's outcome.
        self.assertEqual((a.draws, a.alpha, a.beta, a.status, a.history), (2, 4.0, 2.0, "solved", [[1, 3, 4]]))
        self.assertAlmostEqual(a.pass_rate, 4 / 6)
        self.assertEqual((b.alpha, b.beta, b.status, b.last_step), (1.0, 3.0, "never_solved", 1))
