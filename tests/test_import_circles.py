"""No import circle in the studio's side of the repository: `studio/`, `workers/`, `launcher/` and
`rollout_client/`, walked as one graph so a circle across two of them counts too (counting imports
inside functions and the package `__init__` modules an import runs; trainers/ has its own check,
tests/trainers/test_layout.py)."""

from __future__ import annotations

from tests.import_graph import circle, import_graph, package_modules

PACKAGES = ("studio", "workers", "launcher", "rollout_client")


def test_the_walk_sees_the_studio_side_edges_it_must():
    # Guards the walk itself: a function-level import, a from-package import, a package __init__ edge.
    graph = import_graph(package_modules(*PACKAGES))
    assert "studio.experiments.paths" in graph["studio.datasets.storage"]
    assert "workers.torchrun" in graph["workers.launch"]  # imported inside a function
    assert "workers.mirroring.registry" in graph["workers.mirroring.wandb_tracker"]
    assert "workers.mirroring" in graph["workers.tasks"]
    assert {m for m in graph if m.startswith(("launcher.", "rollout_client."))}  # those packages were walked


def test_no_import_circle_in_studio_workers_launcher_or_rollout_client():
    assert circle(import_graph(package_modules(*PACKAGES))) == []
