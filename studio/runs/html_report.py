"""A run as one self-contained HTML file: its curves (plotly.js inlined from the installed `plotly`
package), chosen rollouts, settings, provenance and notes. It opens from disk with no studio and no
network: nothing is linked, every byte it needs is inside (a test checks there is no http(s) src or href).

Chosen rollouts: those a teammate noted, then the best and the worst of the last few training steps; the
texts are cut at TEXT_CHARS so a report of a long-context run stays a few MB beside plotly's 4.6 MB.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

from studio.runs import provenance, rollout_query, series
from studio.runs.models import Rollout, Run
from studio.sharing.models import Note

CURVE_POINTS = 500
NOTED_ROLLOUTS = 20
EXTREME_STEPS = 3
TEXT_CHARS = 4000
# As the run page draws (frontend/static/js/curves.js): up to MARKED_POINTS a curve's points are marked
# (one point as a line draws nothing: a one-step report looked empty), and steps spanning fewer than
# FEW_STEPS get a tick at every step, one step the range step ± 0.5 (plotly's own: -1..1, ticked in halves).
MIN_LINE_POINTS, MARKED_POINTS, FEW_STEPS = 2, 12, 8


def plotly_source() -> str:
    """plotly.min.js as text, ready to inline (it holds no `</script`: checked, since that would end the tag)."""
    text = (files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    if "</script" in text.lower():
        raise RuntimeError("plotly.min.js holds '</script' and cannot be inlined")
    return text


def curves(run: Run) -> dict[str, dict[str, list[float]]]:
    """{metric key: {x: steps, y: values}}, at most CURVE_POINTS points each (bucket means past that)."""
    window = series.Window(x="step", points=CURVE_POINTS)
    keys = series.metric_keys(run.pk)
    return {key: {"x": s.x, "y": s.y} for key, s in series.run_series(run.pk, keys, window).items() if len(s)}


def trace_mode(points: int) -> str:
    return "markers" if points < MIN_LINE_POINTS else "lines+markers" if points < MARKED_POINTS else "lines"


def step_axis(steps: list[float]) -> dict[str, Any]:
    """Plotly's x-axis settings for a panel whose curves hold these steps."""
    axis: dict[str, Any] = {"title": {"text": "step"}}
    if not steps or max(steps) - min(steps) >= FEW_STEPS:
        return axis
    axis |= {"tickmode": "linear", "tick0": 0, "dtick": 1}
    if max(steps) == min(steps):
        axis["range"] = [steps[0] - 0.5, steps[0] + 0.5]
    return axis


def panels(curves: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """A panel per metric namespace ("reward/mean" -> "reward"), sorted: its title, its curves' keys
    with their trace mode, and its x axis."""
    groups: dict[str, list[str]] = {}
    for key in sorted(curves):
        groups.setdefault(key.split("/", 1)[0] if key.find("/") > 0 else key, []).append(key)
    return [{"title": title, "traces": [{"key": k, "mode": trace_mode(len(curves[k]["x"]))} for k in keys],
             "xaxis": step_axis([x for k in keys for x in curves[k]["x"]])}
            for title, keys in groups.items()]  # fmt: skip


def chosen_rollouts(run: Run) -> list[dict[str, Any]]:
    """Noted rollouts first, then each of the last EXTREME_STEPS steps' best and worst (of the training split; an
    evaluation run's own split, the only one it has)."""
    picked: dict[int, str] = {}
    noted = (
        Note.objects.filter(run=run, rollout__isnull=False).order_by("-created").values_list("rollout_id", flat=True)
    )
    for rollout_id in noted[:NOTED_ROLLOUTS]:
        picked.setdefault(rollout_id, "noted")
    split = rollout_query.default_split(run.kind)
    steps = (Rollout.objects.filter(run=run, split=split).order_by("-step").values_list("step", flat=True)
             .distinct()[:EXTREME_STEPS])  # fmt: skip
    for step in steps:
        rows = Rollout.objects.filter(run=run, split=split, step=step)
        best, worst = rows.order_by("-reward", "id").first(), rows.order_by("reward", "id").first()
        if best is not None:
            picked.setdefault(best.pk, f"best of step {step}")
        if worst is not None:
            picked.setdefault(worst.pk, f"worst of step {step}")
    rows = Rollout.objects.filter(pk__in=picked).select_related("run_prompt")
    by_id = {row.pk: row for row in rows}
    return [_rollout(by_id[pk], why) for pk, why in picked.items() if pk in by_id]


def _rollout(row: Rollout, why: str) -> dict[str, Any]:
    return {
        "id": row.pk, "why": why, "step": row.step, "prompt_id": row.prompt_id, "reward": row.reward,
        "advantage": row.advantage, "num_tokens": row.num_tokens, "finish_reason": row.finish_reason,
        "scores": {name: (s or {}).get("score") for name, s in (row.scores or {}).items()},
        "prompt": _text(row.run_prompt.content), "completion": _text(row.completion if row.turns is None else row.turns),
        "notes": [{"tag": n.tag, "text": n.text} for n in row.notes.all()],
    }  # fmt: skip


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        text = "\n\n".join(
            f"[{m.get('role', 'turn')}] {m.get('content', m.get('text', ''))}" if isinstance(m, dict) else str(m)
            for m in value
        )
    else:
        text = str(value)
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f"… ({len(text):,} characters in all)"


def notes(run: Run) -> list[dict[str, Any]]:
    rows = Note.objects.filter(run=run).select_related("author", "rollout").order_by("created", "id")
    return [n.as_dict() for n in rows]


def render(run: Run) -> str:
    """The report's HTML."""
    drawn = curves(run)
    data = {"curves": drawn, "panels": panels(drawn), "rollouts": chosen_rollouts(run), "notes": notes(run),
            "run": {"id": run.pk, "name": run.name, "state": run.state}}  # fmt: skip
    context = {
        "run": run, "data": data, "spec": json.dumps(run.spec, indent=2, sort_keys=False, default=str),
        "provenance": provenance.summary(run), "rollouts": data["rollouts"], "notes": data["notes"],
        "generated": timezone.now(), "plotly": mark_safe(plotly_source()),  # noqa: S308 - the package's own file, checked above
    }  # fmt: skip
    return render_to_string("runs/report.html", context)


def filename(run: Run) -> str:
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in run.name)[:60] or "run"
    return f"run-{run.pk}-{slug}.html"
