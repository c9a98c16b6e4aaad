"""How usage reads on the pages (studio.runs.usage): device time in hours (seconds below a minute), token counts
with separators, a cost with its currency; "—" where there is nothing to show."""

from __future__ import annotations

from django import template

from studio.runs import estimates, usage

register = template.Library()
DASH = "—"
MAX_ESTIMATE_RUNS = 1000


@register.filter
def device_time(seconds: float | None) -> str:
    """12.5 → "12.5 s", 5400 → "1.50 h"; minutes between."""
    if seconds is None:
        return DASH
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:,.2f} h"


@register.filter
def tokens(count: int | None) -> str:
    return DASH if count is None else f"{int(count):,}"


@register.filter
def money(cost: float | None, currency: str | None) -> str:
    """A cost as "12.34 USD" (four decimals below one unit: a tiny run's cents still show); "—" when unpriced."""
    if cost is None or not currency:
        return DASH
    return f"{cost:,.4f} {currency}" if cost < 1 else f"{cost:,.2f} {currency}"


@register.inclusion_tag("runs/run_usage.html")
def run_usage(run) -> dict:
    """The run page's usage line (members only: the page leaves it out for a share link's reader)."""
    return {"usage": usage.of_run(run), "run": run}


@register.inclusion_tag("runs/estimate.html", takes_context=True)
def run_estimate(context, experiment) -> dict:
    """The experiment page's estimate before launch (studio.runs.estimates): for one run, or for ?estimate_runs=N
    (a sweep of N trials); a count that is not a whole number from 1 to MAX_ESTIMATE_RUNS is said beside the box
    and one run is estimated."""
    request = context.get("request")
    raw = ((request.GET.get("estimate_runs") if request is not None else None) or "1").strip()
    runs, error = 1, ""
    if raw.isdigit() and 1 <= int(raw) <= MAX_ESTIMATE_RUNS:
        runs = int(raw)
    else:
        error = f"runs: a whole number from 1 to {MAX_ESTIMATE_RUNS}, got {raw!r}"
    try:
        found = estimates.estimate(experiment, runs=runs)
    except (KeyError, TypeError, ValueError) as exc:  # settings that cannot run: the page says why above them
        return {"estimate": None, "why": str(exc)[:200]}
    return {"estimate": found, "error": error}


@register.simple_tag
def run_used(run) -> str:
    """A runs table's word on what a run used: "1.2 min GPU · 12,345 tokens · 0.0123 USD"; "" before it used
    anything (queued, ingested, recorded before usage was)."""
    if not run.device_seconds and not run.tokens_generated:
        return ""
    shown = usage.of_run(run)
    where = "GPU" if run.gpu_seconds else "CPU"
    parts = [f"{device_time(run.device_seconds)} {where}", f"{tokens(run.tokens_generated)} tokens"]
    if shown["cost"] is not None:
        parts.append(money(shown["cost"], shown["currency"]))
    return " · ".join(parts)
