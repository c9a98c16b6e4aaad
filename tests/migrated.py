"""The migrated SQLite database a studio that a test starts as processes begins with (browser studios,
real workers): `manage.py migrate` once per test process, a copy for every later studio."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from launcher.processes import ROOT

SQLITE = "sqlite:///"
_template: Path | None = None  # the first migrated database of this test process


def migrate(env: dict[str, str]) -> None:
    """The database `env`'s DATABASE_URL names (a SQLite file) migrated as `manage.py migrate` leaves an
    empty studio: by that command the first time (about 4 s here), as a copy of its result after that."""
    global _template
    url = env["DATABASE_URL"]
    assert url.startswith(SQLITE), f"a copy is only made of a SQLite file, not {url}"
    path = Path(url.removeprefix(SQLITE))
    if _template is None:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        template = Path(tempfile.mkdtemp(prefix="migrated-studio-")) / "studio.sqlite3"
        _copy(path, template)
        _template = template
    else:
        _copy(_template, path)


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup: the whole database, whatever of it still sits in the write-ahead log."""
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)
