"""The HTML report lays out its panels as the run page draws them: few points marked, few steps ticked
at every step, one step centred on step ± 0.5 (issue 39: a one-step report drew lines only and looked empty)."""

from studio.runs.html_report import panels, step_axis, trace_mode


def test_a_lone_point_is_a_marker_few_are_marked_and_many_are_a_line():
    assert [trace_mode(n) for n in (1, 2, 11, 12, 500)] == ["markers", *["lines+markers"] * 2, "lines", "lines"]


def test_one_step_is_centred_with_one_tick_and_a_short_span_ticks_each_step():
    assert step_axis([0.0, 0.0]) == {"title": {"text": "step"}, "tickmode": "linear", "tick0": 0, "dtick": 1,
                                     "range": [-0.5, 0.5]}  # fmt: skip
    assert step_axis([1, 3])["dtick"] == 1 and "range" not in step_axis([1, 3])
    assert step_axis(list(range(0, 100))) == {"title": {"text": "step"}}


def test_panels_group_keys_by_namespace_with_each_traces_mode():
    drawn = panels({"reward/mean": {"x": [5], "y": [0.1]}, "reward/std": {"x": [5], "y": [0.0]},
                    "loss": {"x": list(range(20)), "y": [0.0] * 20}})  # fmt: skip
    assert [p["title"] for p in drawn] == ["loss", "reward"]
    assert drawn[1]["traces"] == [{"key": "reward/mean", "mode": "markers"}, {"key": "reward/std", "mode": "markers"}]
    assert drawn[1]["xaxis"]["range"] == [4.5, 5.5] and "range" not in drawn[0]["xaxis"]
