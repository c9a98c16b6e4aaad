"""The one-command studio: `python -m launcher up | worker | test` (wrapped by ./studioctl)."""

from __future__ import annotations

import argparse
import os
import sys


# The commands import Django and the studio; imported only when one runs, so `up --help` answers with
# any Python 3, before setup has made the virtualenv (./studioctl falls back to python3 for --help).
def up(args: argparse.Namespace) -> int:
    from launcher.studio import up as run

    return run(args)


def worker(args: argparse.Namespace) -> int:
    from launcher.studio import worker as run

    return run(args)


def test(args: argparse.Namespace) -> int:
    from launcher.testing import test as run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="studioctl", description="Rollout Studio: up, worker, test")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the whole studio")
    p_up.add_argument("--host", default=os.environ.get("STUDIO_HOST", "127.0.0.1"),
                      help="address the web server listens on (default: $STUDIO_HOST, else 127.0.0.1; 0.0.0.0 for a team)")
    p_up.add_argument("--port", type=int, default=int(os.environ.get("STUDIO_PORT", "8000")),
                      help="its port (default: $STUDIO_PORT, else 8000)")  # fmt: skip
    p_up.add_argument("--concurrency", type=int, default=None, help="runs at once (default: one per GPU, else 1)")
    p_up.set_defaults(func=up)
    p_worker = sub.add_parser("worker", help="start a Celery worker only (another machine)")
    p_worker.add_argument("--queues", default="default,gpu", help="comma-separated: default, gpu")
    p_worker.add_argument(
        "--concurrency", type=int, default=None, help="runs at once (default: one per GPU for the gpu queue, else 1)"
    )
    p_worker.add_argument("--name", default="", help="worker name (default: <queues>@<host>)")
    p_worker.set_defaults(func=worker)
    p_test = sub.add_parser("test", help="run the test suite")
    p_test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_test.set_defaults(func=test)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["test"]:  # everything after `test` goes to pytest untouched
        return test(argparse.Namespace(pytest_args=argv[1:]))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
