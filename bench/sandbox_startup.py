"""Start-up cost of one sandbox process: start a worker, make one trivial call, close it.

    python bench/sandbox_startup.py            # 20 starts
    python bench/sandbox_startup.py --starts 50

Prints the isolation in force and the median and best wall-clock milliseconds per start, then
the same for `run_program_tests` with one stdio test. Not run by the test suite. A busy machine
shows in the numbers: compare runs taken back to back (the best start is the least disturbed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainers.sandbox import process as sandbox  # noqa: E402
from trainers.sandbox.process import Limits, Worker
from trainers.sandbox.programs import run_program_tests  # noqa: E402

LIMITS = Limits(timeout_s=5.0, memory_mb=256)


def one_worker() -> None:
    worker = Worker.start(LIMITS, source="def score():\n    return 1\n")
    try:
        assert worker.call().value == 1
    finally:
        worker.close()


def one_program() -> None:
    run = run_program_tests("print(input())", [{"input": "7", "output": "7"}], "stdio", LIMITS)
    assert run.results[0]["passed"], run


def timed(action, starts: int) -> list[float]:
    action()  # warm the page cache and any one-off probe
    out = []
    for _ in range(starts):
        began = time.perf_counter()
        action()
        out.append((time.perf_counter() - began) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    print(f"isolation: {sandbox.isolation()}")
    for name, action in (
        ("worker start + call + close", one_worker),
        ("run_program_tests (1 stdio test)", one_program),
    ):
        ms = timed(action, args.starts)
        print(f"{name}: median {statistics.median(ms):.1f} ms, best {min(ms):.1f} ms ({args.starts} starts)")


if __name__ == "__main__":
    main()
