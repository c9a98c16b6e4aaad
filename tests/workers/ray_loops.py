"""What the ranks of the Ray tests run instead of `train` (trainers.scale.ray_cluster.train_on_ray's `loop`):
importable by the Ray workers, which run on this machine with the test's sys.path."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from trainers.spec import RunSpec


def fixed_batch_gradients(spec: RunSpec, reporter, should_stop):
    """The trainer's optimisation pass on the fixed batch of tests.trainers.distributed_loss_worker,
    on this rank's share; saves the gradient each pass steps with (grads-world<W>-rank<R>.pt)."""
    from tests.trainers.distributed_loss_worker import main

    out = Path(spec.checkpoint.output_dir)
    path = out / f"spec-rank{os.environ.get('RANK', '0')}.json"
    path.write_text(spec.model_dump_json())
    main(str(path), str(out))
    return SimpleNamespace(status="succeeded", steps=0, metrics={}, checkpoint=None, detail="gradients saved")


def gradients_then_stuck(spec: RunSpec, reporter, should_stop):
    """`fixed_batch_gradients`, then a rank stuck in a step that never ends: it never asks should_stop again."""
    fixed_batch_gradients(spec, reporter, should_stop)
    reporter.log(f"rank {os.environ.get('RANK')} is stuck")
    should_stop()
    time.sleep(3600)
