"""The search tool's BM25 index: the hand-written inverted index (HEAD's `search.py`) against bm25s.

    python bench/search_index.py                    # ~20 MB JSON Lines, two shapes, 300 queries each
    python bench/search_index.py --mb 5 --queries 100

Writes a generated collection (Zipf-distributed pseudo-words, seeded) in two shapes of the same
size: many short documents (about 1 KB each) and few long ones (about 100 KB each). Each
implementation builds its index in a fresh subprocess from the same `read_documents` output and
prints: the import (bm25s pulls numba in when it is installed), the build's wall-clock and CPU
seconds, its peak and kept resident memory above what the documents already held (`VmHWM` reset
through /proc/self/clear_refs just before the build), and the median / 95th-percentile CPU time of
`search(query, top_k=3)` for queries of one to four words. Each figure is the best of `--rounds`
fresh processes (CPU time, since a shared machine inflates wall-clock time). The old implementation is loaded from
`git show <rev>:trainers/rollout/environments/tools/search.py` (the part above the tool class).
Not run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SEARCH = "trainers/rollout/environments/tools/search.py"


def write_collection(path: Path, megabytes: float, doc_words: int, seed: int) -> int:
    """Documents of about `doc_words` words each until the file holds `megabytes`; returns their count."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "dr", "st", "en", "or"]
    vocab = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(60_000)})
    rng.shuffle(vocab)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf, as word frequencies in text
    cum, total = [], 0.0
    for w in weights:
        total += w
        cum.append(total)
    target, written, count = int(megabytes * 1_000_000), 0, 0
    with path.open("w") as f:
        while written < target:
            n = max(1, int(rng.gauss(doc_words, doc_words / 4)))
            words = rng.choices(vocab, cum_weights=cum, k=n)
            line = json.dumps({"title": " ".join(words[:4]).title(), "text": " ".join(words)}) + "\n"
            f.write(line)
            written += len(line)
            count += 1
    return count


def make_queries(path: Path, n: int, seed: int) -> list[str]:
    """Words drawn from the documents themselves, so most queries match something."""
    rng = random.Random(seed + 1)
    lines = path.read_text().splitlines()
    queries = []
    for _ in range(n):
        words = json.loads(rng.choice(lines))["text"].split()
        queries.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))))
    return queries


def old_module(rev: str) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:{SEARCH}"], cwd=ROOT, check=True, capture_output=True, text=True)
    code = source.stdout.split("@TOOLS.register")[0]  # the index and the reader, not the registered tool
    with tempfile.NamedTemporaryFile("w", suffix="_old_search.py", delete=False) as f:
        f.write(code)
    module = types.ModuleType("old_search")
    module.__file__ = f.name
    sys.modules["old_search"] = module  # dataclasses look their module up
    exec(compile(code, f.name, "exec"), module.__dict__)
    os.unlink(f.name)
    return module


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measure(which: str, rev: str, path: str, queries: list[str]) -> dict:
    """In this (fresh) process: build one index and query it."""
    started = time.perf_counter()
    if which == "old":
        module = old_module(rev)
    else:
        import bm25s  # noqa: F401  (its import is what the first build in a process pays)

        from trainers.rollout.environments.tools import search as module
    import_s = time.perf_counter() - started
    documents = module.read_documents(path, "jsonl", "text", "title")
    before = status_kb("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        peak_field = "VmHWM"
    except OSError:
        peak_field = "VmRSS"
    started, cpu = time.perf_counter(), time.process_time()
    index = module.BM25(documents)
    build_s, build_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    peak, kept = status_kb(peak_field), status_kb("VmRSS")
    index.search(queries[0], 3)  # warm
    latencies, tops = [], []
    for q in queries:
        t = time.process_time()
        hits = index.search(q, 3)
        latencies.append(time.process_time() - t)
        tops.append([doc for _, doc in hits])
    latencies.sort()
    return {
        "which": which,
        "documents": len(documents),
        "import_s": import_s,
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "peak_mb": (peak - before) / 1024,
        "kept_mb": (kept - before) / 1024,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "tops": tops,
    }


def run_child(which: str, rev: str, path: Path, queries: list[str]) -> dict:
    args = [sys.executable, __file__, "--child", which, "--rev", rev, "--path", str(path)]
    out = subprocess.run(args, input=json.dumps(queries), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=20.0, help="collection size in MB")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per implementation and shape")
    ap.add_argument("--rev", default="HEAD", help="the git revision holding the hand-written index")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.rev, args.path, json.loads(sys.stdin.read()))))
        return

    shapes = [("many short (~1 KB)", 170), ("few long (~100 KB)", 17_000)]
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'shape':<20} {'index':<5} {'docs':>6} {'import s':>9} {'build s':>8} {'CPU s':>6} {'peak MB':>8} "
              f"{'kept MB':>8} {'p50 ms':>7} {'p95 ms':>7}")  # fmt: skip
        for name, doc_words in shapes:
            path = Path(tmp) / "docs.jsonl"
            write_collection(path, args.mb, doc_words, args.seed)
            queries = make_queries(path, args.queries, args.seed)
            results: dict[str, list[dict]] = {"old": [], "new": []}
            for _ in range(args.rounds):
                for which in ("old", "new"):  # alternate, so a busy machine disturbs both alike
                    results[which].append(run_child(which, args.rev, path, queries))
            for which, runs in results.items():
                best = min(runs, key=lambda r: r["build_cpu_s"])
                print(f"{name:<20} {which:<5} {best['documents']:>6} {min(r['import_s'] for r in runs):>9.2f} "
                      f"{best['build_s']:>8.2f} {best['build_cpu_s']:>6.2f} {min(r['peak_mb'] for r in runs):>8.0f} "
                      f"{min(r['kept_mb'] for r in runs):>8.0f} {min(r['p50_ms'] for r in runs):>7.2f} "
                      f"{min(r['p95_ms'] for r in runs):>7.2f}")  # fmt: skip
            same = sum(a == b for a, b in zip(results["old"][0]["tops"], results["new"][0]["tops"], strict=True))
            print(f"{'':<20} same top 3 (documents and order) for {same} of {len(queries)} queries "
                  f"({path.stat().st_size / 1e6:.1f} MB file)")  # fmt: skip


if __name__ == "__main__":
    main()
