"""`test`: pytest on tests/ under an embedded Redis, then the database-bound tests again on PostgreSQL + Redis when
they answer on localhost (or when STUDIO_TEST_TEAM_SCALE=1 demands it)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from launcher.processes import ROOT, Children, ensure_redis, port_open
from studio.lib.env import FALSE, TRUE

HELP = """usage: ./studioctl test [pytest arguments]

Runs pytest on tests/ with the embedded defaults (SQLite, an embedded Redis), then the database-bound
tests again on PostgreSQL + Redis when both answer on localhost (5432, 6379): exactly what .ci/run calls.
The whole suite takes about 75 minutes on 2 quiet CPU cores (CI, with set-up), 94 on 2 shared ones.

environment:
  STUDIO_TEST_TEAM_SCALE     auto (the default: when both answer), 1 (demand the second pass), 0 (skip it)
  STUDIO_TEST_DATABASE_URL   the second pass's database (postgres://postgres@127.0.0.1:5432/test)
  STUDIO_TEST_REDIS_URL      the second pass's Redis (redis://127.0.0.1:6379/15)

Every argument goes to pytest (paths, -k, -m, -x ...): `./studioctl test tests/studio -m "not slow"`.
pytest's own options follow.
"""


def test(args: argparse.Namespace) -> int:
    """pytest on tests/ under an embedded Redis; again on PostgreSQL + Redis when they answer."""
    if any(arg in ("-h", "--help") for arg in args.pytest_args):  # this command's help, then pytest's once
        print(HELP, flush=True)
        return _pytest(["--help"], os.environ.copy())
    children = Children()
    try:
        ensure_redis(children)
        code = _pytest([*args.pytest_args], os.environ.copy())
        if _team_scale_reachable():
            env = dict(os.environ)
            env["DATABASE_URL"] = os.environ.get("STUDIO_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
            env["REDIS_URL"] = os.environ.get("STUDIO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
            env.setdefault("STUDIO_TEST_DB_NAME", f"test_studio_{os.getpid()}")
            print("\n=== again at team scale: PostgreSQL + Redis ===", flush=True)
            team_args = _team_scale_args(args.pytest_args)
            team_code = _pytest(team_args, env) if team_args else 0
            code = code or team_code
        return code
    finally:
        children.stop_all()


# What the second pass runs again on PostgreSQL + Redis: the packages whose code the database and the broker
# can change the outcome of (raw SQL and jsonb in runs/, row locks in fleet/ and accounts/, websockets and
# channels_redis in runs/live/ and sharing/, 64-bit ids in the API schema run, NUL bytes and lost commits in
# workers/). The forms and pages of datasets, environments, experiments and rubrics read and write through the
# ORM alone: run once, in the first pass, so the suite fits CI's 90 minutes (the whole of tests/studio added
# about 4 minutes there).
TEAM_SCALE_TESTS = (
    "tests/studio/accounts",
    "tests/studio/fleet",
    "tests/studio/runs",
    "tests/studio/sharing",
    "tests/studio/test_api_schema.py",
    "tests/studio/test_bad_input.py",
    "tests/studio/test_bootstrap.py",
    "tests/studio/test_end_to_end.py",
    "tests/workers",
)


def _team_scale_args(pytest_args: list[str]) -> list[str]:
    """The second pass's pytest arguments: the given test paths that lie under TEAM_SCALE_TESTS (a folder
    above some of them stands for those), all of TEAM_SCALE_TESTS when no path is given, with every other
    argument as given; [] when the paths given hold none of them (nothing to run again)."""

    def is_path(arg: str) -> bool:
        return not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists()

    def again(path: str) -> list[str]:
        if path.startswith(TEAM_SCALE_TESTS):
            return [path]
        folder = path.rstrip("/") + "/"
        return [t for t in TEAM_SCALE_TESTS if t.startswith(folder)]

    paths = [a for a in pytest_args if is_path(a)]
    options = [a for a in pytest_args if not is_path(a)]
    if not paths:
        return [*TEAM_SCALE_TESTS, *options]
    kept = [t for p in paths for t in again(p)]
    return [*kept, *options] if kept else []


def _pytest(extra: list[str], env: dict[str, str]) -> int:
    code = subprocess.call([sys.executable, "-m", "pytest", *extra], cwd=ROOT, env=env)
    return 0 if code == 5 else code  # 5: nothing collected under a filter; not a failure of the suite


def _team_scale_reachable() -> bool:
    mode = (os.environ.get("STUDIO_TEST_TEAM_SCALE") or "auto").lower()  # auto, or a true/false word
    if mode != "auto" and mode in FALSE:
        return False
    reachable = port_open("127.0.0.1", 5432) and port_open("127.0.0.1", 6379)
    if mode in TRUE and not reachable:
        raise SystemExit("STUDIO_TEST_TEAM_SCALE=1 but PostgreSQL (5432) or Redis (6379) does not answer")
    return reachable
