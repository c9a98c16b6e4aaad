"""The run page's JS modules under node, without a browser: number formatting.

Each test copies frontend/static/js next to a small ES module script (the page's modules
are plain ES modules; the copy gets a package.json saying so), runs it with node and reads
back the JSON it prints. The DOM the inspector touches is a few stub objects. Skipped
where node is not installed."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def run_js(tmp_path: Path, body: str):
    folder = tmp_path / "js"
    shutil.copytree(JS, folder)
    (folder / "package.json").write_text('{"type": "module"}')
    script = folder / "check.js"
    script.write_text(body)
    done = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


FMT_CASES = [
    # (value, digits, shown)
    (1500.25, 4, "1,500"),  # was "15": zeros stripped from the whole part
    (1230.2, 4, "1,230"),  # was "123"
    (12340.3, 4, "12,340"),  # was "1.234e+4" / "1234"
    (123456.7, 4, "123,457"),
    (1500.25, 5, "1,500.3"),
    (0.1234567, 4, "0.1235"),
    (0.5, 4, "0.5"),
    (-0.25, 3, "-0.25"),
    (0.04, 4, "0.04"),
    (0.0012345, 3, "0.00123"),
    (3e-5, 4, "3e-5"),
    (2.5e-4, 4, "2.5e-4"),
    (1.23456e-7, 3, "1.23e-7"),
    (1500, 4, "1,500"),
    (0, 4, "0"),
    (-0.0, 4, "0"),
    (None, 4, "–"),
]


def test_fmt_keeps_the_whole_part_and_strips_only_zeros_after_the_point(tmp_path):
    cases = [[value, digits] for value, digits, _ in FMT_CASES]
    got = run_js(
        tmp_path,
        f"""
        const {{ fmt }} = await import("./api.js");
        const cases = {json.dumps(cases)};
        console.log(JSON.stringify([...cases.map(([v, d]) => fmt(v, d)), fmt(NaN)]));
        """,
    )
    want = [shown for _, _, shown in FMT_CASES] + ["–"]
    assert list(zip(cases + [["NaN", 4]], got, strict=True)) == list(zip(cases + [["NaN", 4]], want, strict=True))
