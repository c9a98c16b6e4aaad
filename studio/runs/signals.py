"""What a run tells features built on runs (sweeps), without studio.runs importing them: sent once the
rows are committed.

- metrics_written(run_id, step, keys): a batch of metric points of one step was stored (studio.runs.reports);
- run_finished(run_id, state): the run reached a final state (studio.runs.lifecycle.finish).

A receiver runs in the process that wrote the rows (a worker, the ingest API); it must not raise.
"""

from django.dispatch import Signal

metrics_written = Signal()
run_finished = Signal()
