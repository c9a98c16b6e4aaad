"""Mirroring a run to the experiment trackers its team uses (Trackio, W&B, MLflow), off the training thread.

`start(run)` reads the run's mirror settings (studio.tracking.services.settings_for_run) and returns a
`Mirror` (None when no tracker is switched on): one background thread per tracker, each fed by a
bounded queue, each talking to its tracker through the tracker's own Python client
(workers.mirroring.registry). `Mirror.wrap(reporter)` gives the trainer a Reporter that
hands every report to the studio's reporter first (so the studio loses nothing whatever a tracker
does) and then to each queue without waiting: a full queue drops the report for that tracker and
counts it. Each thread writes its tracker's MirrorStatus, which the run page shows.
"""

from workers.mirroring.mirror import Mirror, MirroredReporter, start

__all__ = ["Mirror", "MirroredReporter", "start"]
