"""The dataset reader before and after ijson and charset-normalizer: seconds and peak memory per file.

"old" is `trainers/data/readers.py` and `text_encoding.py` as committed at a git revision (default
HEAD: the hand-written JSON-list parser and encoding sniffing), loaded from a temporary package;
"new" is the working tree. Each reading runs in a fresh subprocess that prints its wall and CPU
seconds, its resident set before reading and its peak (`VmHWM`), the rows it read and how it
ended. Files (written once into a temporary folder):

- `list.json`: one JSON list of ROWS objects on one line (what `json.dump(rows)` writes), ~200 B each;
- `list-broken.json`: the same with its last row damaged (the error names line and column);
- `list-nan.json`: the same with `NaN` in its last row (what `json.dump` writes for a float nan);
- `latin1.csv`: a CSV in Latin-1 (its first row is not UTF-8: the file fails, naming what it looks like);
- `latin1.jsonl`: ROWS/10 JSON Lines in Latin-1, every line a bad row naming what it looks like;
- `utf16.csv`: a CSV in UTF-16 LE without a BOM (the file-level sniff fails it at once).

    python bench/data_readers.py [--rows 1000000] [--rounds 2] [--rev HEAD]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def row(i: int) -> dict:
    return {"prompt": f"Question {i}: what is {i} plus {3 * i}? " + "some context " * 9, "answer": str(4 * i),
            "level": i % 5, "score": i / 7, "tags": ["math", "easy"], "ok": True, "none": None}  # fmt: skip


def write_files(folder: Path, rows: int) -> None:
    with (folder / "list.json").open("w") as out:
        out.write("[")
        for i in range(rows):
            out.write((", " if i else "") + json.dumps(row(i)))
        out.write("]")
    text = (folder / "list.json").read_bytes()
    last = text.rindex(b'"ok": true')
    (folder / "list-broken.json").write_bytes(text[:last] + b'"ok": tru' + text[last + 10 :])
    (folder / "list-nan.json").write_bytes(text[:last] + b'"ok": NaN' + text[last + 10 :])
    del text
    latin = [f"Le café numéro {i} est très bon à Noël, déjà vu,{i}\n" for i in range(rows // 10)]
    (folder / "latin1.csv").write_bytes(("prompt,answer\n" + "".join(latin)).encode("latin-1"))
    lines = (json.dumps({"prompt": f"Le café numéro {i} est très bon", "answer": str(i)}, ensure_ascii=False)
             for i in range(rows // 10))  # fmt: skip
    (folder / "latin1.jsonl").write_bytes("".join(line + "\n" for line in lines).encode("latin-1"))
    (folder / "utf16.csv").write_bytes(("prompt,answer\n" + "".join(latin[:1000])).encode("utf-16-le"))


def old_package(folder: Path, rev: str) -> None:
    """`oldreaders/` in `folder`: the two modules as committed at `rev`, importing each other."""
    package = folder / "oldreaders"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module in ("readers", "text_encoding"):
        source = subprocess.run(["git", "show", f"{rev}:trainers/data/{module}.py"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        source = source.replace("from trainers.data import text_encoding", "from oldreaders import text_encoding")
        (package / f"{module}.py").write_text(source)


def peak_kib() -> tuple[int, int]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])


def worker(side: str, path: str, folder: str) -> None:
    if side == "old":
        sys.path.insert(0, folder)
        from oldreaders import readers
    else:
        sys.path.insert(0, str(ROOT))
        from trainers.data import readers
    before, _ = peak_kib()
    rows = bad = 0
    ended = "ok"
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        for _, record in readers.iter_records(path):
            rows += 1
            bad += isinstance(record, readers.RowError)
    except readers.DataError as exc:
        ended = str(exc)[:100]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    _, peak = peak_kib()
    print(json.dumps({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rss_before_mib": round(before / 1024, 1),
                      "peak_mib": round(peak / 1024, 1), "rows": rows, "bad_rows": bad, "ended": ended}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--files", nargs="*", default=None, help="only these of the files above")
    parser.add_argument("--worker", nargs=3, metavar=("SIDE", "PATH", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    with tempfile.TemporaryDirectory(prefix="data-readers-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        write_files(folder, args.rows)
        old_package(folder, args.rev)
        print(f"# files written in {time.perf_counter() - started:.1f} s; "
              f"list.json {(folder / 'list.json').stat().st_size / 1e6:.0f} MB", flush=True)  # fmt: skip
        names = args.files or ["list.json", "list-broken.json", "list-nan.json", "latin1.csv", "latin1.jsonl",
                               "utf16.csv"]  # fmt: skip
        for name in names:
            best: dict[str, dict] = {}
            for _ in range(args.rounds):  # old and new alternate, so a busy moment hits both
                for side in ("old", "new"):
                    out = subprocess.run([sys.executable, __file__, "--worker", side, str(folder / name), tmp],
                                         check=True, capture_output=True, text=True).stdout  # fmt: skip
                    result = json.loads(out)
                    if side not in best or result["wall_s"] < best[side]["wall_s"]:
                        best[side] = result
            for side in ("old", "new"):
                print(json.dumps({"file": name, "side": side, **best[side]}), flush=True)


if __name__ == "__main__":
    main()
