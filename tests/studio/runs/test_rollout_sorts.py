"""Sorting the inspector by completion length and by advantage: keyset pages through ties
(many rollouts share a length or an advantage) with no repeats and no gaps, both directions."""

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from studio.runs import rollout_query
from studio.runs.models import Rollout
from tests.studio.records import prompt_of
from tests.studio.runs.pages import url, walk

# Awkward floats on purpose: the cursor carries the last value as JSON, and 0.1 + 0.2 or 1/3
# must come back bit for bit or a page boundary inside a tie repeats or skips rows.
ADVANTAGES = [-1.5, 0.0, 0.1 + 0.2, 1 / 3, 0.0, -1.5, 1 / 3, 2.0, 0.1 + 0.2]
LENGTHS = [12, 40, 12, 7, 40, 12, 128, 7]


@pytest.fixture
def rows(run):
    prompt = prompt_of(run, "q")
    return Rollout.objects.bulk_create(
        Rollout(run=run, step=i // 8, prompt_id=f"p{i // 8}", sample_index=i % 8, run_prompt=prompt, completion="a",
                reward=float(i % 3), advantage=ADVANTAGES[i % len(ADVANTAGES)], num_tokens=LENGTHS[i % len(LENGTHS)],
                finish_reason="length" if i % 5 == 0 else "stop")
        for i in range(61)
    )  # fmt: skip


@pytest.mark.parametrize("field", ["num_tokens", "advantage"])
@pytest.mark.parametrize("limit", [1, 4, 7, 500])
def test_pages_walk_every_rollout_in_order_ascending_and_descending(api, alice, run, rows, field, limit):
    api.force_authenticate(alice)
    ascending = [r.pk for r in sorted(rows, key=lambda r: (getattr(r, field), r.pk))]
    assert walk(api, run, order=field, limit=limit) == ascending
    assert walk(api, run, order=f"-{field}", limit=limit) == ascending[::-1]


def test_page_rows_carry_the_sorted_value_in_order(api, alice, run, rows):
    api.force_authenticate(alice)
    lengths = [r["num_tokens"] for r in api.get(url(run, order="-num_tokens", limit=10)).json()["results"]]
    assert lengths == sorted((r.num_tokens for r in rows), reverse=True)[:10]
    advantages = [r["advantage"] for r in api.get(url(run, order="advantage", limit=10)).json()["results"]]
    assert advantages == sorted(r.advantage for r in rows)[:10]


def test_the_new_sorts_combine_with_filters(api, alice, run, rows):
    api.force_authenticate(alice)
    picked = [r for r in rows if 2 <= r.step <= 5 and r.finish_reason == "stop"]
    want = [r.pk for r in sorted(picked, key=lambda r: (r.advantage, r.pk), reverse=True)]
    assert walk(api, run, order="-advantage", step_min=2, step_max=5, finish_reason="stop", limit=3) == want


def test_a_rollout_arriving_between_pages_is_neither_repeated_nor_skips_others(api, alice, run, rows):
    api.force_authenticate(alice)
    first = api.get(url(run, order="num_tokens", limit=10)).json()
    seen = [r["id"] for r in first["results"]]
    # Shorter than every listed rollout, so it sorts before the cursor and is on no later page.
    Rollout.objects.create(run=run, step=99, prompt_id="late", sample_index=0, run_prompt=prompt_of(run, "q"), completion="a", reward=0.0,
                           num_tokens=1)  # fmt: skip
    rest = walk(api, run, order="num_tokens", limit=10, cursor=first["next_cursor"])
    assert seen + rest == [r.pk for r in sorted(rows, key=lambda r: (r.num_tokens, r.pk))]


@pytest.mark.parametrize("order", ["num_tokens", "-num_tokens", "advantage", "-advantage"])
def test_a_page_past_a_cursor_is_a_range_scan_of_its_own_index(run, rows, order):
    # The (run, field, id) index serves both the ORDER BY (no sort of the whole run in a temporary
    # b-tree) and the cursor's bound (the scan starts at the cursor).
    first = rollout_query.page(run.pk, QueryDict(f"order={order}&limit=5"))
    with CaptureQueriesContext(connection) as queries:
        rollout_query.page(run.pk, QueryDict(f"order={order}&limit=5&cursor={first['next_cursor']}"))
    if connection.vendor != "sqlite":
        pytest.skip("reads SQLite's query plan")
    with connection.cursor() as cur:
        cur.execute("EXPLAIN QUERY PLAN " + queries[-1]["sql"])
        plan = " ".join(row[-1] for row in cur.fetchall())
    field = order.lstrip("-")
    assert "TEMP B-TREE" not in plan and f"(run_id=? AND {field}" in plan, plan


@pytest.mark.parametrize(
    "cursor", ["WyJhIiwgMV0=", "WzEuMCwgInh4Il0=", "W3RydWUsIDFd"]
)  # ["a", 1], [1.0, "xx"], [true, 1]
def test_a_cursor_whose_value_is_not_a_number_is_refused(api, alice, run, rows, cursor):
    api.force_authenticate(alice)
    resp = api.get(url(run, order="advantage", cursor=cursor))
    assert resp.status_code == 400 and "cursor" in resp.json()
