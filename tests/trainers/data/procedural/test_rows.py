"""Pools and the held-out set: deterministic, disjoint, and what an evaluation of a procedural spec reads."""

import json

from trainers.data.procedural.rows import held_out_rows, pool_rows, write_jsonl
from trainers.data.prompts import load_rows
from trainers.spec import DataSpec, ProceduralSpec


def test_the_held_out_set_never_shares_a_prompt_with_its_level_pool():
    spec = ProceduralSpec(task="arithmetic", max_difficulty=3, pool_size=150, held_out_per_level=20)
    rows = held_out_rows(spec)
    assert [r.id for r in rows][:2] == ["held-out-L1-0", "held-out-L1-1"]
    for level in spec.levels:
        pool = {r.prompt for r in pool_rows("arithmetic", spec.seed, level, spec.pool_size)}
        held = [r.prompt for r in rows if r.fields["difficulty"] == level]
        assert len(held) == 20 and len(set(held)) == 20 and not pool & set(held)


def test_a_level_with_few_problems_gives_what_is_left():
    # Sorting at level 1 has 10 x 10 = 100 prompts; a pool of 400 draws covers nearly all of them.
    spec = ProceduralSpec(task="sorting", max_difficulty=1, pool_size=400, held_out_per_level=50)
    held = held_out_rows(spec)
    pool = {r.prompt for r in pool_rows("sorting", 0, 1, 400)}
    assert len(held) < 50 and len(pool) + len(held) <= 100


def test_evaluating_a_procedural_spec_reads_its_held_out_set():
    data = DataSpec(procedural={"task": "reverse", "max_difficulty": 2, "held_out_per_level": 3})
    rows = load_rows(data)
    assert [r.id for r in rows] == [f"held-out-L{lv}-{i}" for lv in (1, 2) for i in range(3)]
    assert load_rows(data.model_copy(update={"limit": 4}))[-1].id == "held-out-L2-0"


def test_rows_written_as_jsonl_read_back_with_their_fields(tmp_path):
    rows = pool_rows("counting", 0, 2, 3)
    path = write_jsonl(rows, tmp_path / "rows.jsonl")
    back = load_rows(DataSpec(path=str(path), extra_fields=["difficulty"]))
    assert [(r.prompt, r.fields) for r in back] == [(r.prompt, r.fields) for r in rows]
    assert json.loads(path.read_text().splitlines()[0])["id"] == "L2-0"
