"""The worker's Reporter writes rows and events in batches, with gap-free seqs, then publishes."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.runs.models import Checkpoint, MetricPoint, PromptStat, RolloutScore, Run, RunEvent, RunPrompt
from studio.runs.models import Rollout as RolloutRow
from tests.studio.base import StudioTestCase
from trainers.report import STOP_NOW, CriterionScore, Rollout
from workers.reporting import CancelCheck, DatabaseReporter


def rollout(step: int, i: int, reward: float) -> Rollout:
    return Rollout(step=step, prompt_id="p1", sample_index=i, prompt="Say a", completion="a" * 300, reward=reward,
                   scores={"letter": CriterionScore(reward, "fraction of a")}, advantage=reward - 0.5, num_tokens=5)  # fmt: skip


class ReporterTest(StudioTestCase):
    def test_it_buffers_metrics_and_logs_until_the_steps_rollouts_then_writes_them_in_one_batch(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
        reporter.metrics(1, {"reward/mean": 0.5, "actor/loss": 1.25})
        reporter.log("step 1")
        self.assertEqual(RunEvent.objects.filter(run=run).count(), 0)
        reporter.rollouts(1, [rollout(1, 0, 0.0), rollout(1, 1, 1.0)])
        self.assertEqual(
            list(RunEvent.objects.filter(run=run).values_list("seq", "kind")),
            [(1, "metrics"), (2, "log"), (3, "rollouts")],
        )
        self.assertEqual(MetricPoint.objects.filter(run=run, key="actor/loss").get().value, 1.25)
        rows = RolloutRow.objects.filter(run=run).order_by("sample_index")
        self.assertEqual([r.reward for r in rows], [0.0, 1.0])
        self.assertEqual(len(rows[0].preview), 200)
        self.assertEqual(RolloutScore.objects.filter(run=run, criterion="letter", score=1.0).count(), 1)
        run.refresh_from_db()
        self.assertEqual((run.last_seq, run.last_step), (3, 1))

    def test_rollout_events_carry_summaries_with_database_ids(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        surplus = rollout(3, 1, 0.5)
        surplus.trained = False
        reporter.rollouts(3, [rollout(3, 0, 0.25), surplus])
        reporter.flush()
        items = RunEvent.objects.get(run=run, kind="rollouts").payload["items"]
        self.assertEqual([(i["sample_index"], i["trained"]) for i in items], [(0, True), (1, False)])
        self.assertEqual(list(RolloutRow.objects.filter(run=run).order_by("sample_index").values_list("trained", flat=True)),
                         [True, False])  # fmt: skip
        item = items[0]
        self.assertEqual(item["id"], RolloutRow.objects.get(run=run, sample_index=0).pk)
        self.assertEqual(item["scores"], {"letter": 0.25})
        self.assertEqual(item["preview"], "a" * 200)

    def test_checkpoints_are_written_at_once_and_kept_for_resume(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
        reporter.checkpoint(10, "/tmp/ckpt-10")
        self.assertEqual(Checkpoint.objects.get(run=run).path, "/tmp/ckpt-10")
        self.assertEqual(RunEvent.objects.get(run=run).payload, {"path": "/tmp/ckpt-10"})

    def test_it_publishes_each_event_to_the_runs_group_after_commit(self):
        run = self.make_run("running")
        layer = get_channel_layer()
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(f"run-{run.pk}", channel)
        reporter = DatabaseReporter(run.pk)
        reporter.log("hello")
        with self.captureOnCommitCallbacks(execute=True):
            reporter.flush()
        message = async_to_sync(layer.receive)(channel)
        self.assertEqual(message["type"], "run.events")
        [event] = message["events"]
        self.assertEqual(event["data"], {"line": "hello"})
        self.assertEqual(event["seq"], 1)

    def test_the_cancel_check_sees_a_cancel_request(self):
        run = self.make_run("running")
        check = CancelCheck(run.pk, every_s=0)
        self.assertFalse(check())
        run.cancel_requested = True
        run.save()
        self.assertTrue(check())

    def test_a_stop_now_without_a_checkpoint_answers_stop_now_and_an_interrupt_still_saves(self):
        run = self.make_run("running")
        check = CancelCheck(run.pk, every_s=0)
        Run.objects.filter(pk=run.pk).update(cancel_requested=True, stop_saves_checkpoint=False)
        self.assertEqual(check(), STOP_NOW)  # the trainer ends without saving
        check.interrupt()  # the worker shuts down meanwhile: the run must be resumable
        self.assertIs(check(), True)

    def test_a_run_stopped_by_its_worker_shutting_down_is_not_logged_as_cancelled(self):
        # Issue 39: after a clean Ctrl-C of `up` the run's log said "[cancelled]" though nobody cancelled it.
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
        reporter.stop_check = CancelCheck(run.pk, every_s=0)
        reporter.status("cancelled", "stopped at step 2")  # a user's stop
        reporter.stop_check.interrupt()  # SIGTERM / SIGINT to the worker
        reporter.status("cancelled", "stopped at step 3: the step-3 checkpoint is kept")
        reporter.flush()
        lines = [e.payload["line"] for e in RunEvent.objects.filter(run=run, kind="log").order_by("seq")]
        self.assertEqual(lines, ["[cancelled] stopped at step 2",
                                 "[interrupted] the worker was stopped; resumes on the next start of a worker "
                                 "(stopped at step 3: the step-3 checkpoint is kept)"])  # fmt: skip

    def test_the_cancel_check_stops_a_run_the_studio_has_failed(self):
        # The sweeper marks a silent worker's run failed; if that worker is alive after all
        # (a long pause, a network split), its trainer must stop rather than train on.
        run = self.make_run("running")
        check = CancelCheck(run.pk, every_s=0)
        self.assertFalse(check())
        run.state = "failed"
        run.save()
        self.assertTrue(check())


class PromptOnceTest(StudioTestCase):
    """A prompt is stored once per run, however many samples and steps draw it."""

    def test_a_long_prompt_drawn_by_every_sample_of_every_step_is_stored_once(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        long_prompt = [{"role": "system", "content": "x" * 1_000_000}, {"role": "user", "content": "Say  a\nplease"}]
        for step in (1, 2, 3):
            # a fresh but equal object each step, and the trainer's "@1" id for a second draw
            prompt = [dict(m) for m in long_prompt]
            reporter.rollouts(step, [
                Rollout(step=step, prompt_id=pid, sample_index=i, prompt=prompt, completion="a", reward=0.0)
                for pid in ("p1", "p1@1") for i in range(4)
            ] + [Rollout(step=step, prompt_id="p2", sample_index=0, prompt="Say b", completion="b", reward=1.0)])  # fmt: skip
        reporter.flush()
        self.assertEqual(RolloutRow.objects.filter(run=run).count(), 27)
        stored = RunPrompt.objects.filter(run=run).order_by("chars")
        self.assertEqual([p.chars for p in stored], [5, 1_000_000 + len("Say  a\nplease")])
        self.assertEqual([p.preview for p in stored], ["Say b", "Say a please"])  # the last user message
        self.assertEqual(RolloutRow.objects.filter(run=run, run_prompt=stored[1]).count(), 24)
        items = RunEvent.objects.filter(run=run, kind="rollouts").last().payload["items"]
        self.assertEqual({i["prompt_preview"] for i in items}, {"Say a please", "Say b"})

    def test_a_flush_reads_and_writes_its_prompts_in_a_few_queries_however_many_rollouts(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)

        def prompt_queries(step: int) -> int:
            batch = [Rollout(step=step, prompt_id=f"p{i % 16}", sample_index=i, prompt=f"question {i % 16}",
                             completion="a", reward=0.0) for i in range(128)]  # fmt: skip
            with CaptureQueriesContext(connection) as queries:
                reporter.rollouts(step, batch)
            return sum("runs_runprompt" in q["sql"] for q in queries.captured_queries)

        self.assertEqual(prompt_queries(1), 3)  # which exist, insert the 16 new ones, read their ids
        self.assertEqual(prompt_queries(2), 1)  # all known: one read
        self.assertEqual(RunPrompt.objects.filter(run=run).count(), 16)


class NulBytesTest(StudioTestCase):
    def test_nul_characters_a_model_emits_are_stored_as_replacement_characters(self):
        # PostgreSQL refuses NUL in text and jsonb; a random tiny model does emit it.
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        reporter.rollouts(
            1, [Rollout(step=1, prompt_id="p", sample_index=0, prompt="a\x00", completion="b\x00c", reward=0.0)]
        )
        reporter.log("line\x00")
        reporter.flush()
        row = RolloutRow.objects.get(run=run)
        self.assertEqual((row.completion, row.preview, row.run_prompt.content), ("b\ufffdc", "b\ufffdc", "a\ufffd"))
        self.assertEqual(RunEvent.objects.get(run=run, kind="log").payload["line"], "line\ufffd")


def episode_turns() -> list[dict]:
    """Three turns as trainers.episodes.Turn.to_dict makes them: a calculator call, a python call that
    raised, then the answer."""

    def call(name, arguments, result="", error=None):
        return {"name": name, "arguments": arguments, "result": result, "error": error, "seconds": 0.01,
                "truncated": False}  # fmt: skip

    def turn(text, calls, observation, reward=0.0, reason=""):
        return {"text": text, "num_tokens": 7, "finish_reason": "stop", "tool_calls": calls,
                "observation": observation, "observation_tokens": 5 * len(observation), "reward": reward,
                "reason": reason, "advantage": 0.0, "answered": not calls}  # fmt: skip

    return [
        turn("<tool_call>calc</tool_call>", [call("calculator", {"expression": "6*7"}, "42")],
             [{"role": "tool", "content": "42"}], 0.1, "well-formed call"),
        turn("```python\n1/0\n```", [call("python", {"code": "1/0"}, error="ZeroDivisionError")],
             [{"role": "tool", "content": "error: ZeroDivisionError"}]),
        turn("The answer is 42.", [], [], 1.0, "correct"),
    ]  # fmt: skip


class TurnsTest(StudioTestCase):
    def test_a_multi_turn_rollout_is_written_with_its_turns_and_the_columns_filters_read(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        turns = episode_turns()
        turns[1]["tool_calls"][0]["error"] += "\x00"  # what a tool printed, as the model can
        episode = Rollout(step=1, prompt_id="p", sample_index=0, prompt=[{"role": "user", "content": "6*7?"}],
                          completion="The answer is 42.", reward=1.0, turns=turns, end_reason="turn_limit")  # fmt: skip
        single = rollout(1, 1, 0.0)
        reporter.rollouts(1, [episode, single])
        row, plain = RolloutRow.objects.filter(run=run).order_by("sample_index")
        self.assertEqual([t["text"] for t in row.turns][2], "The answer is 42.")
        self.assertEqual(row.turns[1]["tool_calls"][0]["error"], "ZeroDivisionError\ufffd")  # NUL: as elsewhere
        self.assertEqual(
            (row.end_reason, row.num_turns, row.tool_calls, row.tool_errors, row.tools_used, row.ended_at_limit),
            ("turn_limit", 3, 2, 1, ",calculator,python,", True),
        )
        # a single-turn completion is the one-turn case
        self.assertEqual((plain.turns, plain.end_reason, plain.num_turns, plain.tool_calls, plain.tools_used,
                          plain.ended_at_limit), (None, "", 1, 0, "", False))  # fmt: skip
        item = RunEvent.objects.get(run=run, kind="rollouts").payload["items"][0]
        self.assertEqual((item["num_turns"], item["tool_errors"], item["tools_used"], item["ended_at_limit"]),
                         (3, 1, ["calculator", "python"], True))  # fmt: skip

    def test_an_episode_that_ended_on_its_own_is_not_at_the_limit(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        reporter.rollouts(1, [Rollout(step=1, prompt_id="p", sample_index=0, prompt="q", completion="a", reward=0.0,
                                      turns=episode_turns()[2:], end_reason="done")])  # fmt: skip
        row = RolloutRow.objects.get(run=run)
        self.assertEqual((row.num_turns, row.tool_calls, row.tools_used, row.ended_at_limit), (1, 0, "", False))


class PromptStatsReportTest(StudioTestCase):
    """The trainer's per-prompt statistics (Reporter.prompt_stats) reach PromptStat through the worker."""

    @staticmethod
    def stat(pid: str, step: int, passed: int, samples: int, alpha: float, beta: float, draws: int) -> dict:
        return {"prompt_id": pid, "draws": draws, "alpha": alpha, "beta": beta, "pass_rate": alpha / (alpha + beta),
                "pass_rate_std": 0.1, "last_step": step, "status": "learnable", "step_passed": passed,
                "step_samples": samples}  # fmt: skip

    def test_a_steps_statistics_are_written_with_its_rollouts_and_announced_by_a_small_event(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk, flush_interval_s=3600)
        reporter.metrics(1, {"prompts/learnable_frac": 0.5})
        reporter.prompt_stats(1, [self.stat("p1", 1, 1, 2, 2.0, 2.0, 1), self.stat("p2", 1, 0, 2, 1.0, 3.0, 1)])
        self.assertFalse(PromptStat.objects.filter(run=run).exists())  # buffered with the step
        reporter.rollouts(1, [rollout(1, 0, 0.0), rollout(1, 1, 1.0)])
        row = PromptStat.objects.get(run=run, prompt_id="p1")
        self.assertEqual((row.draws, row.alpha, row.beta, row.pass_rate, row.history), (1, 2.0, 2.0, 0.5, [[1, 1, 2]]))
        self.assertEqual(
            list(RunEvent.objects.filter(run=run).values_list("seq", "kind", "step", "payload")),
            [(1, "metrics", 1, {"values": {"prompts/learnable_frac": 0.5}}), (2, "prompt_stats", 1, {"prompts": 2}),
             (3, "rollouts", 1, RunEvent.objects.get(run=run, seq=3).payload)],
        )  # fmt: skip
        reporter.prompt_stats(2, [self.stat("p1", 2, 2, 2, 4.0, 2.0, 2)])
        with self.captureOnCommitCallbacks(execute=True):
            self.listen(run)
            reporter.flush()
        row.refresh_from_db()
        self.assertEqual((row.draws, row.last_step, row.history), (2, 2, [[1, 1, 2], [2, 2, 2]]))
        self.assertAlmostEqual(row.pass_rate, 4 / 6)
        run.refresh_from_db()
        self.assertEqual((run.last_seq, run.last_step), (4, 2))
        # published like any event: the count, not the statistics
        [event] = async_to_sync(get_channel_layer().receive)(self.channel)["events"]
        self.assertEqual(
            (event["seq"], event["kind"], event["step"], event["data"]), (4, "prompt_stats", 2, {"prompts": 1})
        )

    def test_a_step_without_statistics_adds_no_event(self):
        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)
        reporter.prompt_stats(1, [])
        reporter.flush()
        self.assertFalse(RunEvent.objects.filter(run=run).exists())

    def listen(self, run) -> None:
        layer = get_channel_layer()
        self.channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(f"run-{run.pk}", self.channel)


class SamplingProgressTest(StudioTestCase):
    """How far a long sampling is (trainers.rollout.progress): its lines reach the run's events as they are
    said, not with the step's rollouts, and the run page carries them with the rule its header applies."""

    def test_a_progress_line_after_a_quiet_spell_is_written_at_once_and_the_page_carries_it(self):
        import json
        import re

        from trainers.rollout.progress import LINE_PATTERN, GenerationProgress

        run = self.make_run("running")
        reporter = DatabaseReporter(run.pk)  # the worker's flush interval
        clock = [0.0]
        progress = GenerationProgress(reporter.log, clock=lambda: clock[0])
        with progress.sampling("step 1", 64):
            for done in (8, 16, 24):
                clock[0] += 5.0
                reporter.last_flush -= 5.0  # the seconds a CPU takes to sample 8 completions of a real model
                progress.add(8)
                lines = list(
                    RunEvent.objects.filter(run=run, kind="log").order_by("seq").values_list("payload", flat=True)
                )
                self.assertEqual(lines[-1]["line"], f"step 1: sampled {done} of 64 completions ({clock[0]:.0f} s)")
        reporter.flush()
        lines = [
            p["line"]
            for p in RunEvent.objects.filter(run=run, kind="log").order_by("seq").values_list("payload", flat=True)
        ]
        self.assertEqual(lines[-1], "step 1: sampled 64 of 64 completions (15 s)")
        self.assertTrue(all(re.match(LINE_PATTERN, line) for line in lines), lines)
        self.client.force_login(self.alice)  # the page: a session, as a browser has
        page = self.client.get(f"/runs/{run.pk}/")
        self.assertEqual(page.status_code, 200)
        html = page.content.decode()
        rules = json.loads(
            re.search(r'<script id="client-rules" type="application/json">(.*?)</script>', html, re.S)[1]
        )
        self.assertEqual(rules["sampling_line"], LINE_PATTERN)
        config = json.loads(re.search(r'<script id="run-config" type="application/json">(.*?)</script>', html, re.S)[1])
        self.assertEqual(config["log_lines"][-1], "step 1: sampled 64 of 64 completions (15 s)")
