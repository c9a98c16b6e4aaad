"""Getting a run to a worker: a broker that cannot be reached, and queued runs after a restart.

The broker is replaced by a test double here (and only here): "the broker is down" and
"the broker forgot its messages" cannot be staged against the suite's shared Redis without
breaking the tests that run beside these. The end-to-end test covers the real broker.
"""

from __future__ import annotations

from unittest import mock

from kombu.exceptions import OperationalError

from studio.celery import app as celery_app
from studio.runs import lifecycle
from studio.runs.models import Run
from tests.studio.base import StudioTestCase


class RunQueueTest(StudioTestCase):
    def test_a_launch_whose_broker_cannot_be_reached_fails_the_run_with_the_reason(self):
        down = OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        with mock.patch.object(celery_app, "send_task", side_effect=down), self.captureOnCommitCallbacks(execute=True):
            response = self.client_for(self.bob).post(f"/api/experiments/{self.experiment.pk}/launch/", {},
                                                      format="json")  # fmt: skip
        self.assertEqual(response.status_code, 201, response.content)
        run = Run.objects.get(pk=response.json()["id"])
        self.assertEqual(run.state, "failed")
        self.assertIn("could not reach the task broker", run.error)
        self.assertIn("Connection refused", run.error)
        states = [e.payload["state"] for e in run.events.filter(kind="status").order_by("seq")]
        self.assertEqual(states, ["queued", "failed"])

    def test_queued_runs_are_sent_again_and_others_are_left_alone(self):
        waiting = [self.make_run("queued"), self.make_run("queued")]
        for state in ("running", "succeeded", "cancelled"):
            self.make_run(state)
        sent = mock.Mock(return_value=mock.Mock(id="task-id"))
        with mock.patch.object(celery_app, "send_task", sent):
            self.assertEqual(lifecycle.requeue_waiting(), [run.pk for run in waiting])
        self.assertEqual([c.kwargs["args"] for c in sent.call_args_list], [[run.pk] for run in waiting])
        self.assertEqual(set(Run.objects.filter(pk__in=[r.pk for r in waiting]).values_list("state", flat=True)),
                         {"queued"})  # fmt: skip
