"""Output past the sandbox's file-size limit, written to the raw stdout descriptor (`os.write(1, ...)`)
or printed, comes back cut with a note saying where and how much was kept, never empty; the next test
of the same program and the next program still run (real sandbox, bubblewrap where it can run)."""

import pytest

from trainers.sandbox.process import Limits, isolation, weak_allowed
from trainers.sandbox.programs import run_program_tests

LIMITS = Limits(timeout_s=20.0, file_size_mb=1)
pytestmark = pytest.mark.skipif(
    isolation() != "bubblewrap" and not weak_allowed(), reason="no sandbox can run user code here"
)
FLOODS = {
    "one raw write": "import os\nos.write(1, b'x' * (3 << 20))",
    "raw writes": "import os\nfor _ in range(3):\n    os.write(1, b'x' * (1 << 20))",
    "print": "print('x' * (3 << 20))",
}


@pytest.mark.parametrize("program", list(FLOODS))
def test_output_past_the_file_size_limit_comes_back_cut_with_a_note(program):
    code = "import sys\nif sys.stdin.readline().strip() == 'flood':\n" + "\n".join(
        "    " + line for line in FLOODS[program].splitlines()
    ) + "\nelse:\n    print('ok')"  # fmt: skip
    run = run_program_tests(code, [{"input": "flood\n", "output": "x"}, {"input": "calm\n", "output": "ok"}],
                            "stdio", LIMITS)  # fmt: skip
    assert run.fatal is None and not run.timed_out
    flooded, calm = run.results[0], run.results[1]
    assert flooded["passed"] is False and flooded["got"] == "x" * 300  # its start, not nothing
    assert flooded["error"] == (
        "the output was cut at the sandbox's file-size limit (1 MiB): 1,048,576 bytes written, the first 524,288 kept"
    )
    assert calm == {"test": 1, "passed": True, "got": "ok\n"}  # the next test of the same program runs
    again = run_program_tests("print(input())", [{"input": "hi\n", "output": "hi"}], "stdio", LIMITS)
    assert again.results[0]["passed"] is True  # and so does the next program


def test_output_longer_than_is_read_back_says_so_and_fails():
    run = run_program_tests("print('\u00e9' * (600 << 10))", [{"input": "", "output": "x"}], "stdio",
                            Limits(timeout_s=20.0))  # fmt: skip
    [result] = run.results.values()
    assert result["passed"] is False and result["got"] == "\u00e9" * 300
    assert result["error"] == "the output was cut: 1,228,801 bytes, more than a test reads back; the first 524,288 kept"
