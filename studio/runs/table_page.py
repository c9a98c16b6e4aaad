"""What a page needs to show the runs table (runs/run_table.html) over any queryset of runs: the runs list, an
experiment's runs, a sweep's trials. `context(request, runs)` reads the query string (studio.runs.table), builds the
page of rows and the links of its headers (sort), chips (drop a filter) and pager; a bad parameter is said above
the table (`table_error`), which then shows the runs newest first."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from studio.experiments.models import Experiment
from studio.lib.params import QueryError, number_param
from studio.runs import table
from studio.runs.models import Run
from studio.runs.series import metric_keys

# Filters a page keeps in its links besides the table's own (the runs list's ?state=).
KEPT = ("state",)
# The form's "add a filter" pair, turned into ?set.<path>=<value> (a form cannot name a field after its input).
ADD_PATH, ADD_VALUE = "add_setting", "add_value"


def added_filter_link(request: HttpRequest) -> str | None:
    """The canonical link when the form asked for a new setting filter (?add_setting=optim.lr&add_value=1e-4), else
    None: the page redirects there, so every view stays a link of ?set.<path>= parameters."""
    path = (request.GET.get(ADD_PATH) or "").strip()
    if not path:
        return None
    params = request.GET.copy()
    value = params.pop(ADD_VALUE, [""])[-1]
    params.pop(ADD_PATH)
    params.setlist(f"{table.SETTING_FILTER}{path}", [*params.getlist(f"{table.SETTING_FILTER}{path}"), value])
    return "?" + params.urlencode()


DASH = "—"


def _number(value: float) -> str:
    return f"{value:.4g}"


def cell_text(value: Any, spread: float | None, n: int | None, column: table.Column) -> str:
    """One cell as text: a metric to four significant digits, a seed group's as "mean ± std (n=3)" (no ± for one
    value), a setting as JSON (text as it is), a date as the list shows it; a dash for nothing."""
    if column.is_metric and n is not None:  # a seed group's
        if value is None:
            return f"{DASH} (n=0)"
        return f"{_number(value)} ± {_number(spread)} (n={n})" if spread is not None else f"{_number(value)} (n={n})"
    if value is None or value == []:
        return DASH
    if isinstance(value, datetime.datetime):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return _number(value)
    return json.dumps(value)


def _run_view(row: table.Row, columns: list[table.Column]) -> dict[str, Any]:
    return {"run": row.run, "cells": [cell_text(v, s, n, c) for (v, s, n), c in zip(row.cells, columns, strict=True)]}


def _row_view(row: table.Row, columns: list[table.Column]) -> dict[str, Any]:
    """What the template shows of a row: a run's cells, or a seed group's with its members' and a summary."""
    if row.run is not None:
        return _run_view(row, columns)
    runs = [m.run for m in row.members]
    states = Counter(run.state for run in runs)
    return {
        **_run_view(row, columns),
        "run": None,
        "first": runs[0],
        "ids": ",".join(str(run.pk) for run in runs),
        "size": len(runs),
        "states": ", ".join(f"{count} {state}" for state, count in states.most_common()),
        "last_step": max(run.last_step for run in runs),
        "tags": sorted({tag.name for run in runs for tag in run.tags.all()}),
        "created": max(run.created for run in runs),
        "members": [_run_view(m, columns) for m in row.members],
    }


def _header(query: table.TableQuery, column: table.Column, kept: dict[str, str]) -> dict[str, Any]:
    sorted_by = query.sort is not None and query.sort[0] == column
    descending = bool(sorted_by and query.sort[1])
    # A first click sorts a metric best first (descending where higher is better), a setting ascending.
    first_descending = column.is_metric and column.reduction != "min"
    next_descending = (not descending) if sorted_by else first_descending
    others = table.TableQuery(**{**query.__dict__, "columns": [c for c in query.columns if c != column]})
    if sorted_by:
        others.sort = None
    return {
        "title": column.title,
        "spelling": column.spelling,
        "is_metric": column.is_metric,
        "sort_link": query.link(sort=("-" if next_descending else "") + column.spelling, **kept),
        "arrow": ("▼" if descending else "▲") if sorted_by else "",
        "remove_link": others.link(**kept),
    }


def _chips(query: table.TableQuery, kept: dict[str, str]) -> list[dict[str, str]]:
    """Each active filter with the link that drops it."""
    chips = []
    for f in query.settings:
        rest = table.TableQuery(**{**query.__dict__, "settings": [g for g in query.settings if g is not f]})
        name, value = f.spelling
        chips.append({"label": f"{name[len(table.SETTING_FILTER) :]} = {value}", "link": rest.link(**kept)})
    for tag in query.tags:
        rest = table.TableQuery(**{**query.__dict__, "tags": [t for t in query.tags if t != tag]})
        chips.append({"label": f"tag {tag}", "link": rest.link(**kept)})
    if query.ids:
        chips.append({"label": f"{len(query.ids)} chosen runs", "link": table.TableQuery(
            **{**query.__dict__, "ids": []}).link(**kept)})  # fmt: skip
    return chips


def context(request: HttpRequest, runs: QuerySet[Run], experiments: QuerySet[Experiment] | None = None) -> dict:
    """The runs table's context for runs/run_table.html over `runs` (already what the user may see)."""
    kept = {name: request.GET[name] for name in KEPT if request.GET.get(name)}
    error = ""
    try:
        query = table.parse_with_group(request.GET)
        number = number_param(request.GET, "page", int)
        number = 1 if number is None else number
        if number < 1:
            raise QueryError("page", "must be 1 or more")
    except QueryError as exc:  # said above the table, which shows the runs newest first
        query, number, error = table.TableQuery(), 1, f"{exc.field}: {exc}"
    offset = (number - 1) * table.PAGE_SIZE
    page = table.page(runs, query, offset=offset)
    newest = page.runs[0].pk if page.runs else None
    pages = max(1, -(-page.total // table.PAGE_SIZE))
    return {
        "table": page,
        "table_rows": [_row_view(row, query.columns) for row in page.rows],
        "table_query": query,
        "table_error": error,
        "table_headers": [_header(query, c, kept) for c in query.columns],
        "table_chips": _chips(query, kept),
        "table_group_link": query.link(group=None if query.group else table.GROUP_SEED, **kept),
        "table_metric_keys": metric_keys(newest) if newest else [],  # suggestions for a new column
        "table_experiments": list(experiments[:200]) if experiments is not None else [],
        "table_page": {
            "number": number,
            "pages": pages,
            "previous": query.link(page=number - 1, **kept) if number > 1 else "",
            "next": query.link(page=number + 1, **kept) if number < pages else "",
        },  # fmt: skip
        "table_kept": kept,
    }
