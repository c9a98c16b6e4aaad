"""The layer rules of DESIGN.md, checked on the real import graph of a fresh interpreter:
the web tier starts without torch and never imports workers/; trainers/ never imports the web stack."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "studio.settings", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_the_web_tier_loads_every_url_and_the_asgi_app_without_torch_or_workers():
    modules = imported_after("import django; django.setup(); import studio.urls, studio.asgi")
    assert "django" in modules  # the probe really loaded the studio
    assert not modules & {"torch", "transformers", "workers", "ray"}


def test_the_trainer_loop_imports_no_web_stack():
    modules = imported_after("import trainers.run.loop, trainers.run.evaluate, trainers.cli")
    assert "torch" in modules
    assert not modules & {"django", "rest_framework", "channels", "celery", "studio", "workers"}
    assert "ray" not in modules  # optional: only a run on several machines loads it (trainers.scale.ray_cluster)
