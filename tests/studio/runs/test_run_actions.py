"""A run's actions and the truth of its end state: the one rule of which actions a run allows
(Run.action_refusals) as the API, the websocket summary, the runs list and the services follow it;
the runs a resumed run continues (lifecycle.lineage) and the metrics API's step bounds that draw
them; the "scoring failed" verdict tallied when a run ends (studio.runs.scoring)."""

from __future__ import annotations

from studio.runs import lifecycle, panels
from studio.runs.models import Checkpoint, MetricPoint, Run, with_action_facts
from tests.studio.base import StudioTestCase
from trainers.report import CriterionScore, Rollout
from workers.reporting import DatabaseReporter


class ActionRuleTest(StudioTestCase):
    def checkpoint(self, run: Run, step: int = 4) -> Checkpoint:
        return Checkpoint.objects.create(run=run, step=step, path=f"/ck/{run.pk}/step-{step}")

    def test_each_action_is_offered_only_where_it_can_work(self):
        cases = {
            # state, kind, checkpoint, experiment kept, cancel asked -> actions
            "queued": (("queued", "train", False, True, False), ["clone", "cancel"]),
            "running, checkpointed": (("running", "train", True, True, False), ["evaluate", "clone", "cancel"]),
            "running, stop asked": (("running", "train", False, True, True), ["clone"]),
            "succeeded, no checkpoint": (("succeeded", "train", False, True, False), ["clone"]),
            "succeeded, checkpointed": (("succeeded", "train", True, True, False), ["resume", "evaluate", "clone"]),
            "failed, checkpointed": (("failed", "train", True, True, False), ["resume", "evaluate", "clone"]),
            "interrupted": (("interrupted", "train", True, True, False), ["resume", "evaluate", "clone"]),
            "cancelled, experiment deleted": (("cancelled", "train", True, False, False), ["resume", "evaluate"]),
            "an evaluation": (("succeeded", "eval", False, True, False), ["clone"]),
        }
        for name, ((state, kind, checkpointed, kept, asked), expected) in cases.items():
            with self.subTest(name):
                run = self.make_run(state, kind=kind, cancel_requested=asked)
                if checkpointed:
                    self.checkpoint(run)
                if not kept:
                    Run.objects.filter(pk=run.pk).update(experiment=None)
                    run.refresh_from_db()
                self.assertEqual(run.actions(), expected)
                # The annotated form (lists) says the same without a query per run.
                [annotated] = with_action_facts(Run.objects.filter(pk=run.pk))
                with self.assertNumQueries(0):
                    self.assertEqual(annotated.actions(), expected)

    def test_a_run_resumed_from_a_checkpoint_it_never_passed_can_still_be_resumed_from_that_one(self):
        source = self.make_run("succeeded")
        self.checkpoint(source, 4)
        resumed = lifecycle.resume(source, self.bob)
        Run.objects.filter(pk=resumed.pk).update(state="cancelled")  # stopped before its first checkpoint
        resumed.refresh_from_db()
        self.assertIn("resume", resumed.actions())
        self.assertNotIn("evaluate", resumed.actions())

    def test_a_run_whose_newest_checkpoint_is_the_last_step_of_its_settings_is_not_offered_resume(self):
        run = self.make_run("succeeded")  # its settings train 5 steps, as a resume of it would
        self.checkpoint(run, 3)
        self.assertEqual(run.actions(), ["resume", "evaluate", "clone"])  # steps 4-5 are left to train
        self.checkpoint(run, 5)
        self.assertEqual(run.actions(), ["evaluate", "clone"])
        [annotated] = with_action_facts(Run.objects.filter(pk=run.pk))
        with self.assertNumQueries(0):
            self.assertEqual(annotated.actions(), ["evaluate", "clone"])
        response = self.client_for(self.bob).post(f"/api/runs/{run.pk}/resume/", {}, format="json")
        self.assertEqual(response.status_code, 409, response.content)
        self.assertIn("its newest checkpoint is the last step of its settings (5 of 5)", response.json()["detail"])

    def test_the_api_and_the_websocket_summary_carry_the_actions(self):
        run = self.make_run("succeeded")
        self.checkpoint(run)
        listed = self.client_for(self.carol).get("/api/runs/").json()["results"]
        self.assertEqual([r["actions"] for r in listed if r["id"] == run.pk], [["resume", "evaluate", "clone"]])
        detail = self.client_for(self.carol).get(f"/api/runs/{run.pk}/").json()
        self.assertEqual((detail["actions"], detail["scoring_failed"]), (["resume", "evaluate", "clone"], []))
        self.assertEqual(run.summary()["actions"], ["resume", "evaluate", "clone"])

    def test_the_services_refuse_with_the_rules_reason(self):
        evaluation = self.make_run("succeeded", kind="eval")
        orphan = self.make_run("failed")
        Run.objects.filter(pk=orphan.pk).update(experiment=None)
        stopping = self.make_run("running", cancel_requested=True)
        bob = self.client_for(self.bob)
        cases = [
            (evaluation, "resume", "only training runs can be resumed"),
            (orphan, "clone", "its experiment was deleted"),
            (stopping, "cancel", "a stop was already asked for"),
            (stopping, "resume", "run is running; cancel it or wait"),
            (orphan, "evaluate", "run has no checkpoint to evaluate"),
        ]
        for run, action, reason in cases:
            with self.subTest(action=action, run=run.state):
                response = bob.post(f"/api/runs/{run.pk}/{action}/", {}, format="json")
                self.assertEqual(response.status_code, 409, response.content)
                self.assertIn(reason, response.json()["detail"])
                run.refresh_from_db()
                self.assertIn(reason, run.action_refusals()[action])

    def test_stopping_a_run_answers_with_what_it_now_allows(self):
        run = self.make_run("running")
        answer = self.client_for(self.bob).post(f"/api/runs/{run.pk}/cancel/").json()
        self.assertEqual((answer["cancel_requested"], answer["actions"]), (True, ["clone"]))

    def test_stop_now_asks_for_no_checkpoint_and_says_so_in_the_log(self):
        bob = self.client_for(self.bob)
        saving, now, bad = self.make_run("running"), self.make_run("running"), self.make_run("running")
        self.assertEqual(bob.post(f"/api/runs/{saving.pk}/cancel/", {}, format="json").status_code, 200)
        self.assertEqual(bob.post(f"/api/runs/{now.pk}/cancel/", {"checkpoint": False}, format="json").status_code, 200)
        refused = bob.post(f"/api/runs/{bad.pk}/cancel/", {"checkpoint": "no"}, format="json")
        self.assertEqual((refused.status_code, list(refused.json())), (400, ["checkpoint"]))
        for run in (saving, now, bad):
            run.refresh_from_db()
        self.assertEqual([r.stop_saves_checkpoint for r in (saving, now)], [True, False])
        self.assertFalse(bad.cancel_requested)  # refused: nothing asked
        lines = {r.pk: [e.payload["line"] for e in r.events.filter(kind="log")] for r in (saving, now)}
        self.assertEqual(lines[saving.pk], ["stop asked for: it stops now, between two sampled tokens, saving the "
                                            "last whole step's checkpoint"])  # fmt: skip
        self.assertEqual(lines[now.pk], ["stop now asked for: it stops now, between two sampled tokens, without "
                                         "saving a checkpoint"])  # fmt: skip

    def test_the_runs_list_offers_only_allowed_actions_to_editors_and_answers_beside_the_row(self):
        done = self.make_run("succeeded")
        self.checkpoint(done)
        bare = self.make_run("failed")
        self.client.force_login(self.bob)
        page = self.client.get("/runs/").content.decode()
        row = lambda html, run: html[html.index(f'id="run-{run.pk}"') :].split("</tr>")[0]  # noqa: E731
        for action in ('value="resume"', 'value="evaluate"', 'value="clone"'):
            self.assertIn(action, row(page, done))
        self.assertNotIn('value="cancel"', row(page, done))
        self.assertNotIn('value="resume"', row(page, bare))  # no checkpoint: nothing to resume from
        self.assertNotIn('value="evaluate"', row(page, bare))

        # Without JavaScript the form posts here: a refusal is answered in its row, not at the top.
        Run.objects.filter(pk=bare.pk).update(experiment=None)
        response = self.client.post("/runs/", {"run": bare.pk, "action": "clone"})
        self.assertEqual(response.status_code, 409)
        html = response.content.decode()
        self.assertIn("its experiment was deleted", row(html, bare).split("data-action-answer>")[1])
        self.assertNotIn('class="messages"', html)
        resumed = self.client.post("/runs/", {"run": done.pk, "action": "resume"})
        self.assertRedirects(resumed, f"/runs/{Run.objects.get(resumed_from=done).pk}/", fetch_redirect_response=False)

        self.client.force_login(self.carol)  # a viewer: the rows offer nothing
        self.assertNotIn("data-run-actions=", self.client.get("/runs/").content.decode())

    def test_the_run_page_offers_its_actions_to_editors_only(self):
        run = self.make_run("succeeded")
        self.checkpoint(run)
        self.client.force_login(self.bob)
        config = self.client.get(f"/runs/{run.pk}/").context["config"]
        self.assertEqual((config["can_act"], config["run"]["actions"]), (True, ["resume", "evaluate", "clone"]))
        self.client.force_login(self.carol)
        response = self.client.get(f"/runs/{run.pk}/")
        self.assertFalse(response.context["config"]["can_act"])
        self.assertNotIn("data-run-action=", response.content.decode())


class LineageTest(StudioTestCase):
    def points(self, run: Run, steps: range) -> None:
        MetricPoint.objects.bulk_create(
            MetricPoint(run=run, step=s, key="reward/mean", value=s / 10, wall_time=1000.0 + s) for s in steps
        )

    def test_a_resumed_run_continues_its_chain_each_up_to_the_step_it_was_resumed_from(self):
        first = self.make_run("succeeded")
        Checkpoint.objects.create(run=first, step=1, path="/ck/a/step-1")
        Checkpoint.objects.create(run=first, step=2, path="/ck/a/step-2")
        second = lifecycle.resume(first, self.bob)
        self.assertEqual((second.resumed_at_step, second.last_step), (2, 2))  # its progress starts there
        Run.objects.filter(pk=second.pk).update(state="failed")
        Checkpoint.objects.create(run=second, step=4, path="/ck/b/step-4")
        third = lifecycle.resume(Run.objects.get(pk=second.pk), self.bob)
        self.assertEqual(lifecycle.lineage(first), [])
        self.assertEqual(
            lifecycle.lineage(third),
            [
                {"id": first.pk, "name": first.name, "step_min": None, "step_max": 2},
                {"id": second.pk, "name": second.name, "step_min": 3, "step_max": 4},
            ],
        )
        # A run resumed before the step was noted: from its settings' checkpoint folder.
        Run.objects.filter(pk=second.pk).update(resumed_at_step=None)
        self.assertEqual(lifecycle.resumed_at(Run.objects.get(pk=second.pk)), 2)
        # The run page carries it for members, not on a share link (which opens this run only).
        self.client.force_login(self.carol)
        self.assertEqual(len(self.client.get(f"/runs/{third.pk}/").context["config"]["lineage"]), 2)

    def test_the_metrics_api_keeps_the_steps_asked_for_whatever_the_x(self):
        run = self.make_run("succeeded")
        self.points(run, range(1, 11))
        carol = self.client_for(self.carol)
        for x in ("step", "time"):
            with self.subTest(x=x):
                series = carol.get(f"/api/runs/{run.pk}/metrics/?x={x}&step_min=3&step_max=6").json()["series"]
                self.assertEqual(series["reward/mean"]["y"], [0.3, 0.4, 0.5, 0.6])
        self.assertEqual(carol.get(f"/api/runs/{run.pk}/metrics/?step_min=6&step_max=3").status_code, 400)
        self.assertEqual(carol.get(f"/api/runs/{run.pk}/metrics/?step_max=x").status_code, 400)

    def test_a_run_with_validation_reserves_its_validation_panels(self):
        self.assertEqual(panels.reserved({"validation": {"holdout_fraction": 0.1}}),
                         ["val_reward", "val_criteria", "val_pass"])  # fmt: skip
        self.assertEqual(panels.reserved({"validation": None}), [])
        ids = {p.id for p in panels.PANELS}
        self.assertTrue(set(panels.VALIDATION_PANELS) <= ids)


class ScoringFailedTest(StudioTestCase):
    """One rule: a criterion that raised on at least 95% of the run's rollouts failed the run's scoring."""

    def finished_run(self, failing: int, total: int = 40, criteria=("correct",)) -> Run:
        run = self.make_run("running")
        run.spec["rubric"] = {"criteria": [{"name": name, "kind": "exact_match"} for name in criteria]}
        run.save(update_fields=["spec"])
        reporter = DatabaseReporter(run.pk)
        for i in range(total):
            scores = {
                name: CriterionScore(0.0, error="KeyError: 'answer'") if i < failing else CriterionScore(1.0)
                for name in criteria
            }
            reporter.rollouts(1 + i // 8, [Rollout(step=1 + i // 8, prompt_id=str(i), sample_index=0, prompt="p",
                                                   completion="c", reward=0.0, scores=scores)])  # fmt: skip
        reporter.warning(1, "criterion 'correct' failed on 100% of step 1's rollouts")
        reporter.flush()
        self.assertTrue(lifecycle.finish(run.pk, "succeeded", detail="finished"))
        run.refresh_from_db()
        return run

    def test_a_run_whose_criterion_failed_on_every_rollout_says_so_when_it_ends(self):
        run = self.finished_run(failing=40)
        self.assertEqual(run.state, "succeeded")
        self.assertEqual(run.scoring_failed, [{"criterion": "correct", "failed": 40, "rollouts": 40}])
        self.assertEqual(
            run.warning,
            "scoring failed: criterion 'correct' failed on 40 of the run's 40 rollouts (100%); last error: "
            "KeyError: 'answer'. A failed criterion scores 0, so this run's reward says little.",
        )
        warning, status = run.events.order_by("-seq")[:2][::-1]
        self.assertEqual((warning.kind, warning.payload["message"]), ("warning", run.warning))
        self.assertEqual(status.payload["scoring_failed"], run.scoring_failed)
        detail = self.client_for(self.carol).get(f"/api/runs/{run.pk}/").json()
        self.assertEqual(detail["scoring_failed"], [{"criterion": "correct", "failed": 40, "rollouts": 40}])
        self.client.force_login(self.carol)
        self.assertContains(self.client.get("/runs/"), "scoring failed · correct 40/40</span>")
        self.assertContains(self.client.get(f"/runs/{run.pk}/"), "scoring failed · correct 40/40</span>")

    def test_the_rule_holds_at_95_percent_and_leaves_the_warning_below_it(self):
        at = self.finished_run(failing=38)  # 95%
        self.assertEqual(at.scoring_failed, [{"criterion": "correct", "failed": 38, "rollouts": 40}])
        below = self.finished_run(failing=37)
        self.assertEqual((below.scoring_failed, below.scoring), ([], {"rollouts": 40, "failed": {"correct": 37}}))
        self.assertEqual(below.warning, "criterion 'correct' failed on 100% of step 1's rollouts")
        self.assertFalse(below.events.filter(kind="status", payload__has_key="scoring_failed").exists())
        clean = self.finished_run(failing=0)
        self.assertEqual((clean.scoring_failed, clean.scoring), ([], {"rollouts": 40, "failed": {}}))

    def test_every_failing_criterion_is_named(self):
        run = self.finished_run(failing=40, criteria=("correct", "format"))
        self.assertEqual([f["criterion"] for f in run.scoring_failed], ["correct", "format"])
        self.assertIn("criterion 'format' failed on 40 of", run.warning)
