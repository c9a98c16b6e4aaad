"""Multi-turn rollouts in the inspector's API: the filters on turns, tools, tool errors and episodes
that ended at a limit; the detail's turns, capped like other texts and read in full from text/; and
who may read them (members and a live share link; an outsider gets 404).

Runs on the database the suite runs on (SQLite, and PostgreSQL in the team-scale pass): the tool
filter is a LIKE on a packed column (studio.runs.episodes), which both read alike."""

import pytest

from studio.runs import episodes
from studio.runs.models import Rollout
from studio.runs.texts import TEXT_CAP
from studio.sharing.client_rules import rollout_rules
from studio.sharing.models import ShareLink
from tests.studio.records import prompt_of
from tests.studio.runs.pages import url
from tests.workers.test_reporting import episode_turns


def make_episode(run, sample, turns, end_reason="done", step=1):
    return Rollout.objects.create(
        run=run, step=step, prompt_id="p", sample_index=sample, run_prompt=prompt_of(run, "What is 6*7?"),
        completion=turns[-1]["text"] if turns else "", reward=0.0, turns=turns, end_reason=end_reason,
        **episodes.columns(turns, end_reason),
    )  # fmt: skip


@pytest.fixture
def mixed(run):
    """0: three turns, calculator then a python error, at the turn limit; 1: one calculator turn, done;
    2: a single-turn completion; 3: two turns, python without error, out of token budget."""
    turns = episode_turns()
    python_ok = {**turns[1], "tool_calls": [{**turns[1]["tool_calls"][0], "error": None, "result": "ok"}]}
    return [
        make_episode(run, 0, turns, "turn_limit"),
        make_episode(run, 1, [turns[0]], "done"),
        make_episode(run, 2, None, ""),
        make_episode(run, 3, [python_ok, turns[2]], "token_budget"),
    ]


def samples(api, run, **params) -> list[int]:
    response = api.get(url(run, **params, limit=100))
    assert response.status_code == 200, response.json()
    return sorted(r["sample_index"] for r in response.json()["results"])


def test_the_turns_filters_pick_the_episodes_they_name(api, alice, run, mixed):
    api.force_authenticate(alice)
    assert samples(api, run, turns_min=2) == [0, 3]
    assert samples(api, run, turns_max=1) == [1, 2]
    assert samples(api, run, tool="calculator") == [0, 1]
    assert samples(api, run, tool="python") == [0, 3]
    assert samples(api, run, tool="calc") == []  # a whole name, not a part of one
    assert samples(api, run, tool_errors="true") == [0]
    assert samples(api, run, tool_errors="false") == [1, 2, 3]
    assert samples(api, run, ended_at_limit="1") == [0, 3]
    assert samples(api, run, ended_at_limit="1", tool="calculator", turns_min=3) == [0]


def test_bad_filter_values_are_named(api, alice, run, mixed):
    api.force_authenticate(alice)
    assert "turns_min" in api.get(url(run, turns_min="many")).json()
    assert "tool_errors" in api.get(url(run, tool_errors="some")).json()
    assert "ended_at_limit" in api.get(url(run, ended_at_limit="maybe")).json()


def test_the_page_rules_name_the_new_filters_as_the_server_declares_them():
    rules = rollout_rules()
    bounds = {b["param"]: (b["field"], b["bound"]) for b in rules["bounds"]}
    assert bounds["turns_min"] == ("num_turns", "min") and bounds["turns_max"] == ("num_turns", "max")
    assert "ended_at_limit" in rules["flags"] and rules["counts"] == ["tool_errors"]
    assert rules["members"] == [{"param": "tool", "field": "tools_used"}]


def test_summaries_carry_what_the_page_filters_live_rollouts_by(api, alice, run, mixed):
    api.force_authenticate(alice)
    first = next(r for r in api.get(url(run)).json()["results"] if r["sample_index"] == 0)
    assert (first["num_turns"], first["tool_calls"], first["tool_errors"], first["tools_used"]) == (
        3, 2, 1, ["calculator", "python"])  # fmt: skip
    assert (first["ended_at_limit"], first["end_reason"]) == (True, "turn_limit")


def test_the_detail_returns_the_turns_with_tool_calls_and_observations(api, carol, run, mixed):
    api.force_authenticate(carol)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/").json()
    assert [t["text"] for t in body["turns"]] == [t["text"] for t in episode_turns()]
    [call] = body["turns"][1]["tool_calls"]
    assert (call["name"], call["arguments"], call["error"]) == ("python", {"code": "1/0"}, "ZeroDivisionError")
    assert body["turns"][0]["observation"] == [{"role": "tool", "content": "42"}]
    assert (body["turns"][0]["reward"], body["turns"][0]["reason"]) == (0.1, "well-formed call")
    assert body["end_reason"] == "turn_limit" and body["tools_used"] == ["calculator", "python"]
    assert body["truncated"] == {}
    assert api.get(f"/api/runs/{run.pk}/rollouts/{mixed[2].pk}/").json()["turns"] is None


def test_long_turn_texts_and_tool_results_are_capped_and_read_in_full_from_text(api, alice, run):
    turns = episode_turns()
    turns[0]["text"] = "t" * (TEXT_CAP + 10)
    turns[0]["tool_calls"][0]["result"] = "r" * (TEXT_CAP * 3)
    turns[0]["observation"] = [{"role": "tool", "content": "o" * (TEXT_CAP + 1)}]
    rollout = make_episode(run, 0, turns, "done")
    api.force_authenticate(alice)
    body = api.get(f"/api/runs/{run.pk}/rollouts/{rollout.pk}/").json()
    first = body["turns"][0]
    assert len(first["text"]) == len(first["tool_calls"][0]["result"]) == TEXT_CAP
    assert len(first["observation"][0]["content"]) == TEXT_CAP
    total = (TEXT_CAP + 10) + TEXT_CAP * 3 + (TEXT_CAP + 1) + sum(
        len(t) for turn in turns[1:] for t in [turn["text"], *(c["error"] or c["result"] for c in turn["tool_calls"]),
                                              *(m["content"] for m in turn["observation"])])  # fmt: skip
    assert body["truncated"] == {"turns": total}
    # the rest, in windows, as for a prompt or completion
    base = f"/api/runs/{run.pk}/rollouts/{rollout.pk}/text/?field=turns&limit={TEXT_CAP}"
    result, offset = "", 0
    while offset is not None:
        page = api.get(f"{base}&offset={offset}").json()
        assert page["chars"] == total
        result += page["value"][0]["tool_calls"][0]["result"]
        assert page["value"][2]["text"] == ("The answer is 42." if offset == 0 else "")
        offset = page["next_offset"]
    assert result == "r" * (TEXT_CAP * 3)


def test_an_outsider_reads_no_turns_and_a_share_link_does(api, alice, charlie, run, mixed):
    api.force_authenticate(charlie)
    assert api.get(url(run, tool="python")).status_code == 404
    assert api.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/").status_code == 404
    assert api.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/text/?field=turns").status_code == 404
    guest = api.__class__()
    assert guest.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/text/?field=turns").status_code == 403
    link = ShareLink.objects.create(run=run, created_by=alice)
    share = f"share={link.token}"
    assert samples(guest, run, tool_errors="1", share=link.token) == [0]
    detail = guest.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/?{share}").json()
    assert detail["turns"][1]["tool_calls"][0]["error"] == "ZeroDivisionError"
    link.revoke()
    assert guest.get(f"/api/runs/{run.pk}/rollouts/{mixed[0].pk}/text/?field=turns&{share}").status_code == 404
