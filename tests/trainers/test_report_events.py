"""Reports that travel between processes: every Reporter call survives EventReporter -> JSON -> replay."""

import json

import pytest

from trainers.report import CriterionScore, EventReporter, MemoryReporter, Rollout, replay


def test_every_report_kind_survives_json_and_replay():
    sent: list[str] = []
    events = EventReporter(lambda event: sent.append(json.dumps(event)))
    rollout = Rollout(step=1, prompt_id="r0", sample_index=0, prompt="p", completion="c", reward=0.5,
                      scores={"exact": CriterionScore(1.0, "ok")}, advantage=0.25)  # fmt: skip
    events.status("running", "demo")
    events.metrics(1, {"reward/mean": 0.5})
    events.rollouts(1, [rollout])
    events.checkpoint(1, "/out/step-1")
    events.log("step 1/2")
    events.warning(None, "prompts cut")
    events.prompt_stats(1, [{"prompt_id": "r0", "draws": 1}])

    memory = MemoryReporter()
    for line in sent:
        replay(json.loads(line), memory)
    assert memory.states == [("running", "demo")]
    assert memory.metric_points == [(1, {"reward/mean": 0.5})]
    assert memory.rollout_batches == [(1, [rollout])]
    assert memory.checkpoints == [(1, "/out/step-1")]
    assert memory.lines == ["step 1/2"]
    assert memory.warnings == [(None, "prompts cut")]
    assert memory.prompt_stat_batches == [(1, [{"prompt_id": "r0", "draws": 1}])]


def test_an_event_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown report event kind 'exec'"):
        replay({"kind": "exec", "code": "..."}, MemoryReporter())
