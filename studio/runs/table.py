"""The runs table (issue 41, "many runs at a glance"): columns, sorting, filters and seed groups over any queryset of
runs: the runs list, the API's runs list, an experiment's or a sweep's trials. Everything a view shows is in its
query string, so a view is a link:

    ?col=last:reward/mean      the metric's value at the run's highest step
    ?col=best:reward/mean      its best value: the highest, or the lowest for a metric better low (metric_direction)
    ?col=max:actor/kl          its highest / min: lowest value, whatever the metric's direction
    ?col=at100:reward/mean     its value at step 100 (the last one reported at or before step 100)
    ?col=set:optim.lr          a setting: a dotted path into Run.spec
    ?col=run:created           the run's own fields: name, state, step, created
    ?sort=-best:reward/mean    any column, descending with a leading "-"; a bare metric key sorts by its last value
                               (studio.runs.run_sort's `?sort=`); runs without a value come last either way
    ?set.optim.lr=1e-4         runs whose setting equals the value (a number, true/false/null, or text)
    ?set.optim.lr=1e-5..1e-3   runs whose setting lies in the range (either end may be left out)
    ?tag=baseline              runs carrying every tag named (repeat the parameter for more)
    ?experiment=3,4            runs of any of these experiments; ?ids=1,2,3 these runs (a sweep links its trials so)
    ?group=seed                one row per settings (the spec without optim.seed): seed repeats as one row with
                               each metric's mean, sample std and n, its members listed under it

A parameter the table cannot read is a QueryError naming it (a 400 on the API, said above the table on the page).

What it costs, whatever the number of rows: one query for the page's ids (the sort column's value is a correlated
subquery per run reading MetricPoint's (run, key, step) index backwards, as run_sort does), one for the total, one
for the page's rows with every column's value and one for their tags. The display columns are computed for the
page's rows only, not for every run the sort has to look at."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db import models
from django.db.models import Count, Exists, F, FloatField, Max, Min, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KeyTransform

from studio.lib.params import QueryError, as_id
from studio.runs import run_sort
from studio.runs.metric_direction import higher_is_better
from studio.runs.models import MetricPoint, Run, RunTag
from trainers.spec.optim import OptimSpec

COLUMN, SORT, TAG, EXPERIMENT, IDS, GROUP = "col", "sort", "tag", "experiment", "ids", "group"
SETTING_FILTER = "set."  # ?set.<dotted path>=<value or range>
GROUP_SEED = "seed"
# The seed that seed repeats differ by: the run's own (data order, sampling, initialisation). data.seed picks the
# generated problems, so two runs differing in it ran on different prompts: not repeats.
SEED_PATH = ("optim", "seed")
assert "seed" in OptimSpec.model_fields  # the trainer's field this module groups by
METRIC_KINDS = ("last", "best", "max", "min")
RUN_FIELDS = {"name": "name", "state": "state", "step": "last_step", "created": "created",
              # what it used (studio.runs.usage): ?col=run:gpu_seconds&sort=-run:gpu_seconds finds the costly runs
              "device_seconds": "device_seconds", "gpu_seconds": "gpu_seconds",
              "tokens_generated": "tokens_generated", "tokens_trained": "tokens_trained"}  # fmt: skip
MAX_COLUMNS = 20
MAX_IDS = 1000
MAX_DEPTH = 8
PAGE_SIZE = 50
_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_AT = re.compile(r"at([0-9]{1,10})")
_PREFIX = re.compile(r"^(last|best|max|min|at[0-9]+|set|run):")
# The rules the API schema states (GET /api/runs/), the same parse_column and parse_sort apply.
_PATH_RULE = rf"[A-Za-z_][A-Za-z0-9_]{{0,99}}(\.[A-Za-z_][A-Za-z0-9_]{{0,99}}){{0,{MAX_DEPTH - 1}}}"
_COLUMN_RULE = (rf"(last|best|max|min|at[0-9]{{1,10}}):[^\x00-\x1f]{{1,{run_sort.KEY_CHARS}}}|set:{_PATH_RULE}"
                rf"|run:({'|'.join(RUN_FIELDS)})")  # fmt: skip
COLUMN_PATTERN = rf"^({_COLUMN_RULE})$"
# A column, or a bare metric key (run_sort's: no leading -) that does not read as one.
SORT_PATTERN = (rf"^(-?({_COLUMN_RULE}|(?!(last|best|max|min|at[0-9]+|set|run):)[^-\x00-\x1f]"
                rf"[^\x00-\x1f]{{0,{run_sort.KEY_CHARS - 1}}}))?$")  # fmt: skip
# An id as the API schema states it.
ID_RULE = r"[1-9][0-9]{0,17}"
IDS_PATTERN = rf"^[ ,]*({ID_RULE}[ ]*(,[ ,]*{ID_RULE}[ ]*){{0,{MAX_IDS - 1}}})?[ ,]*$"
TAG_PATTERN = rf"^[^\x00-\x1f]{{0,{RunTag.NAME_MAX}}}$"


@dataclass(frozen=True)
class Column:
    """One column of the table: `kind` is a metric's (last, best, max, min, at) or "set" or "run"; `key` the metric
    key, the dotted setting path or the run field; `step` the step of an `at` column."""

    kind: str
    key: str
    step: int | None = None

    @property
    def spelling(self) -> str:
        """How `?col=` and `?sort=` name it."""
        return f"at{self.step}:{self.key}" if self.kind == "at" else f"{self.kind}:{self.key}"

    @property
    def is_metric(self) -> bool:
        return self.kind not in ("set", "run")

    @property
    def is_seed(self) -> bool:
        return self.kind == "set" and tuple(self.key.split(".")) == SEED_PATH

    @property
    def reduction(self) -> str:
        """What a metric column reads of a run's points: last (also `at`), max or min."""
        if self.kind == "best":
            return "max" if higher_is_better(self.key) else "min"
        return "last" if self.kind == "at" else self.kind

    @property
    def title(self) -> str:
        if self.kind == "set" or self.kind == "run":
            return self.key
        if self.kind == "at":
            return f"{self.key} @{self.step}"
        if self.kind == "best":
            return f"{self.key} (best, {'max' if self.reduction == 'max' else 'min'})"
        return f"{self.key} ({self.kind})"

    def expression(self) -> models.Expression:
        """The column's value for each run of a queryset (OuterRef("pk") is the run)."""
        if self.kind == "set":
            return setting(self.key)
        if self.kind == "run":
            return F(RUN_FIELDS[self.key])
        points = MetricPoint.objects.filter(run=OuterRef("pk"), key=self.key)
        if self.kind == "at":
            points = points.filter(step__lte=self.step)
        # last: the (run, key, step) index read backwards, stopping at its first row; max / min read the run's
        # points of the key (the same index's range) and keep one.
        order = {"last": ("-step", "-id"), "max": ("-value", "-step"), "min": ("value", "-step")}[self.reduction]
        return Subquery(points.order_by(*order).values("value")[:1], output_field=FloatField())


def setting(path: str) -> KeyTransform:
    """The JSON value at the dotted `path` of Run.spec (SQL NULL where a run lacks it)."""
    expression: Any = "spec"
    for part in path.split("."):
        expression = KeyTransform(part, expression)
    return expression


def parse_column(raw: str, name: str = COLUMN) -> Column:
    """A Column from its spelling (see the module docstring; taken as given, COLUMN_PATTERN states it); QueryError
    naming `name` otherwise."""
    kind, sep, key = raw.partition(":")
    if not sep or not key:
        raise QueryError(name, f"{raw!r}: a column is <kind>:<key>, e.g. last:reward/mean, best:eval/pass@1, "
                         "at100:reward/mean, set:optim.lr or run:created")  # fmt: skip
    step = None
    if _AT.fullmatch(kind):
        kind, step = "at", int(kind[2:])
    if kind in METRIC_KINDS or kind == "at":
        _check_metric_key(key, name)
    elif kind == "set":
        _check_path(key, name)
    elif kind == "run":
        if key not in RUN_FIELDS:
            raise QueryError(name, f"{raw!r}: a run column is one of {', '.join('run:' + f for f in RUN_FIELDS)}")
    else:
        raise QueryError(name, f"{raw!r}: the kind is one of {', '.join(METRIC_KINDS)}, at<step>, set or run")
    return Column(kind, key, step)


def _check_metric_key(key: str, name: str) -> None:
    if len(key) > run_sort.KEY_CHARS or any(ord(c) < 32 for c in key):
        raise QueryError(name, f"a metric key is 1 to {run_sort.KEY_CHARS} characters without control characters")


def _check_path(path: str, name: str) -> None:
    parts = path.split(".")
    if len(parts) > MAX_DEPTH or not all(_PART.fullmatch(p) for p in parts):
        raise QueryError(name, f"{path!r}: a setting is a dotted path of names into the run's settings, e.g. "
                         f"optim.lr (at most {MAX_DEPTH} names of letters, digits and _)")  # fmt: skip


def parse_sort(raw: str | None) -> tuple[Column, bool] | None:
    """The sort column and whether descending; a bare metric key (run_sort's `?sort=`) is its last value. Taken as
    given (SORT_PATTERN states it)."""
    if not raw:
        return None
    descending = raw.startswith("-")
    rest = raw[1:] if descending else raw
    if _PREFIX.match(rest):
        return parse_column(rest, SORT), descending
    key, descending = run_sort.metric_key(raw)  # QueryError naming `sort`
    return Column("last", key), descending


@dataclass(frozen=True)
class SettingFilter:
    """`?set.<path>=`: equal to `value`, or within [low, high] where `is_range`."""

    path: str
    value: Any = None
    low: float | None = None
    high: float | None = None
    is_range: bool = False

    @property
    def spelling(self) -> tuple[str, str]:
        if self.is_range:
            ends = ("" if e is None else repr(e) for e in (self.low, self.high))
            return f"{SETTING_FILTER}{self.path}", "..".join(ends)
        return f"{SETTING_FILTER}{self.path}", self.value if isinstance(self.value, str) else json.dumps(self.value)

    def apply(self, runs: QuerySet[Run], alias: str) -> QuerySet[Run]:
        runs = runs.alias(**{alias: setting(self.path)})
        if not self.is_range:
            return runs.filter(**{alias: self.value}) if self.value is not None else runs.filter(**{
                f"{alias}__isnull": True})  # fmt: skip
        if self.low is not None:
            runs = runs.filter(**{f"{alias}__gte": self.low})
        if self.high is not None:
            runs = runs.filter(**{f"{alias}__lte": self.high})
        return runs


def parse_value(raw: str) -> Any:
    """A filter's value as the settings hold it: a JSON number, true, false or null, else the text as typed."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, float) and not math.isfinite(value):
        return raw
    return value if isinstance(value, (int, float, bool)) or value is None else raw


def parse_setting_filter(name: str, raw: str) -> SettingFilter:
    path = name[len(SETTING_FILTER) :]
    _check_path(path, name)
    raw = raw.strip()
    if ".." not in raw:
        return SettingFilter(path, value=parse_value(raw))
    ends = []
    for end in raw.split("..", 1):
        try:
            number = float(end) if end.strip() else None
        except ValueError:
            raise QueryError(name, f"{raw!r}: a range is <low>..<high> of numbers, either end left out") from None
        if number is not None and not math.isfinite(number):
            raise QueryError(name, f"{raw!r}: the ends of a range are finite numbers")
        ends.append(number)
    if ends[0] is None and ends[1] is None:
        raise QueryError(name, "a range needs at least one end, e.g. 1e-5..1e-3 or 0.1..")
    if ends[0] is not None and ends[1] is not None and ends[0] > ends[1]:
        raise QueryError(name, f"{raw!r}: the low end is above the high end")
    return SettingFilter(path, low=ends[0], high=ends[1], is_range=True)


def ids_param(params: Mapping[str, Any], name: str) -> list[int]:
    """Ids from repeated and comma-separated values of `name`; QueryError naming it for anything else."""
    raws = params.getlist(name) if hasattr(params, "getlist") else [params.get(name) or ""]
    out = []
    for raw in raws:
        for part in str(raw).split(","):
            if not part.strip():
                continue
            value = as_id(part)
            if value is None:
                raise QueryError(name, f"must be ids separated by commas, got {part.strip()!r}")
            out.append(value)
    if len(out) > MAX_IDS:
        raise QueryError(name, f"at most {MAX_IDS} ids")
    return list(dict.fromkeys(out))


def _many(params: Mapping[str, Any], name: str, strip: bool = True) -> list[str]:
    """The non-blank values of a repeatable parameter (trimmed where `strip`)."""
    raws = params.getlist(name) if hasattr(params, "getlist") else [params.get(name)]
    return [str(r).strip() if strip else str(r) for r in raws if r is not None and str(r).strip()]


@dataclass
class TableQuery:
    """What a query string asks of the table (`parse`): its columns (the sort column among them), sort, filters."""

    columns: list[Column] = field(default_factory=list)
    sort: tuple[Column, bool] | None = None
    settings: list[SettingFilter] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    experiments: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    group: bool = False

    @property
    def metric_columns(self) -> list[Column]:
        return [c for c in self.columns if c.is_metric]

    def link(self, **changes: Any) -> str:
        """The query string of this view with `changes` (sort=..., group=... ; None drops it), for the page's links."""
        pairs = [(COLUMN, c.spelling) for c in self.columns]
        pairs += [f.spelling for f in self.settings] + [(TAG, t) for t in self.tags]
        if self.experiments:
            pairs.append((EXPERIMENT, ",".join(map(str, self.experiments))))
        if self.ids:
            pairs.append((IDS, ",".join(map(str, self.ids))))
        values = {SORT: (("-" if self.sort[1] else "") + self.sort[0].spelling) if self.sort else None,
                  GROUP: GROUP_SEED if self.group else None, **changes}  # fmt: skip
        pairs += [(k, v) for k, v in values.items() if v]
        return "?" + urlencode(pairs)


def parse(params: Mapping[str, Any]) -> TableQuery:
    """The TableQuery of a query string (a QueryDict, or a plain dict of single values)."""
    query = TableQuery()
    asked = _many(params, COLUMN, strip=False)
    if len(asked) > MAX_COLUMNS:
        raise QueryError(COLUMN, f"at most {MAX_COLUMNS} columns")
    for raw in asked:
        column = parse_column(raw)
        if column not in query.columns:
            query.columns.append(column)
    query.sort = parse_sort(params.get(SORT))
    if query.sort and query.sort[0] not in query.columns:
        query.columns.append(query.sort[0])  # a sorted column is shown
    for name in params:
        if name.startswith(SETTING_FILTER):
            for raw in _many(params, name):
                query.settings.append(parse_setting_filter(name, raw))
    query.tags = _many(params, TAG)
    for tag in query.tags:
        if len(tag) > RunTag.NAME_MAX or any(ord(c) < 32 for c in tag):
            raise QueryError(TAG, f"a tag is at most {RunTag.NAME_MAX} characters, without control characters")
    query.experiments = ids_param(params, EXPERIMENT)
    query.ids = ids_param(params, IDS)
    return query


def parse_with_group(params: Mapping[str, Any]) -> TableQuery:
    """parse, and ?group=seed (the page's checkbox; the API has groups/ of its own)."""
    query = parse(params)
    group = (params.get(GROUP) or "").strip()
    if group not in ("", GROUP_SEED):
        raise QueryError(GROUP, f"the only grouping is group={GROUP_SEED}: runs whose settings differ only in "
                         f"{'.'.join(SEED_PATH)}")  # fmt: skip
    return grouped(query) if group == GROUP_SEED else query


def grouped(query: TableQuery) -> TableQuery:
    """The query with its runs grouped by seed repeats; QueryError naming `sort` for a sort by the seed."""
    if query.sort and query.sort[0].is_seed:
        raise QueryError(SORT, "a row of seed repeats holds several seeds: sort by another column")
    query.group = True
    return query


def filtered(runs: QuerySet[Run], query: TableQuery) -> QuerySet[Run]:
    """`runs` narrowed by the query's settings, tags, experiments and ids."""
    for i, setting_filter in enumerate(query.settings):
        runs = setting_filter.apply(runs, f"filter_{i}")
    for tag in query.tags:  # every tag named; Exists, so a run never shows twice
        runs = runs.filter(Exists(RunTag.objects.filter(run=OuterRef("pk"), name=tag)))
    if query.experiments:
        runs = runs.filter(experiment_id__in=query.experiments)
    if query.ids:
        runs = runs.filter(pk__in=query.ids)
    return runs


SORT_ALIAS = "table_sort"


def sorted_runs(runs: QuerySet[Run], query: TableQuery) -> QuerySet[Run]:
    """`runs` in the query's order (newest first without a sort; missing values last either way), carrying only
    the sort column's value: what a page's ids are read from."""
    if query.sort is None:
        return runs.order_by("-created", "-pk")
    column, descending = query.sort
    value = F(SORT_ALIAS)
    order = value.desc(nulls_last=True) if descending else value.asc(nulls_last=True)
    return runs.alias(**{SORT_ALIAS: column.expression()}).order_by(order, "-created", "-pk")


def alias(index: int) -> str:
    return f"col_{index}"


def with_values(runs: QuerySet[Run], columns: Sequence[Column]) -> QuerySet[Run]:
    """`runs` annotated with each column's value as col_<i>, and their tags prefetched (one query more)."""
    return runs.annotate(**{alias(i): c.expression() for i, c in enumerate(columns)}).prefetch_related("tags")


def values_of(run: Run, columns: Sequence[Column]) -> list[Any]:
    return [getattr(run, alias(i)) for i in range(len(columns))]


@dataclass
class Row:
    """A row of the table: one run (`run`) or a seed group (`members`, each a Row of one run). `values` holds each
    column's value (a group's: each metric's mean; its settings, shared; its seeds as a list); `spread` each metric
    column's sample std (None for one value) and `counts` how many members have a value."""

    values: list[Any]
    run: Run | None = None
    members: list[Row] = field(default_factory=list)
    spread: list[float | None] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [self.run.pk] if self.run is not None else [m.run.pk for m in self.members]

    @property
    def cells(self) -> list[tuple[Any, float | None, int | None]]:
        """(value, spread, n) per column, for the template."""
        if self.run is not None:
            return [(v, None, None) for v in self.values]
        return list(zip(self.values, self.spread, self.counts, strict=True))


@dataclass
class Page:
    rows: list[Row]
    total: int  # rows (runs, or groups) in all pages
    offset: int
    limit: int

    @property
    def runs(self) -> list[Run]:
        """Every run shown, a group's members too."""
        return [r.run for row in self.rows for r in ([row] if row.run is not None else row.members)]


def page(runs: QuerySet[Run], query: TableQuery, offset: int = 0, limit: int = PAGE_SIZE) -> Page:
    """One page of the table over `runs` (already narrowed to what the user may see)."""
    runs = filtered(runs, query)
    if query.group:
        return _grouped_page(runs, query, offset, limit)
    ids = list(sorted_runs(runs, query).values_list("pk", flat=True)[offset : offset + limit])
    total = runs.count()
    # The page's runs read again with every column's value: from `runs`, so what the caller annotated stays.
    found = {run.pk: run for run in with_values(runs.filter(pk__in=ids), query.columns)
             .select_related("experiment", "team")}  # fmt: skip
    rows = [Row(values_of(found[pk], query.columns), run=found[pk]) for pk in ids if pk in found]
    return Page(rows, total, offset, limit)


class WithoutSeed(models.Func):
    """Run.spec without optim.seed: what seed repeats share (JSON text on SQLite, jsonb on PostgreSQL)."""

    output_field = models.JSONField()

    def __init__(self) -> None:
        super().__init__(F("spec"))

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, function="JSON_REMOVE",
                           template=f"%(function)s(%(expressions)s, '$.{'.'.join(SEED_PATH)}')", **extra)  # fmt: skip

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template=f"(%(expressions)s #- '{{{','.join(SEED_PATH)}}}')", **extra)


GROUP_ALIAS = "table_group"


def _group_order(query: TableQuery) -> list[Any]:
    """The order of seed groups: by the sort column's mean over the members (a setting's shared value; a run
    field's newest, first or highest), newest group first without a sort."""
    if query.sort is None:
        return [F("newest").desc(), F("first").desc()]
    column, descending = query.sort
    value = F(SORT_ALIAS)
    order = value.desc(nulls_last=True) if descending else value.asc(nulls_last=True)
    return [order, F("newest").desc(), F("first").desc()]


def _sort_aggregate(column: Column) -> Any:
    if column.is_metric:
        return models.Avg(column.expression())
    if column.kind == "run":
        return (Max if column.key in ("created", "step") else Min)(RUN_FIELDS[column.key])
    return None  # a setting: grouped by it (every member shares it)


def _grouped_page(runs: QuerySet[Run], query: TableQuery, offset: int, limit: int) -> Page:
    grouped = runs.annotate(**{GROUP_ALIAS: WithoutSeed()})
    groups = grouped.values(GROUP_ALIAS)
    sort_column = query.sort[0] if query.sort else None
    if sort_column is not None and sort_column.kind == "set":
        groups = grouped.annotate(**{SORT_ALIAS: sort_column.expression()}).values(GROUP_ALIAS, SORT_ALIAS)
    aggregates: dict[str, Any] = {"first": Min("pk"), "newest": Max("created"), "n": Count("pk")}
    if sort_column is not None and sort_column.kind != "set":
        aggregates[SORT_ALIAS] = _sort_aggregate(sort_column)
    groups = groups.annotate(**aggregates).order_by(*_group_order(query))
    total = groups.count()
    chosen = list(groups.values_list("first", flat=True)[offset : offset + limit])
    # The members of the page's groups: the runs whose spec without the seed is one of theirs.
    keys = Run.objects.filter(pk__in=chosen).annotate(**{GROUP_ALIAS: WithoutSeed()}).values(GROUP_ALIAS)
    members = with_values(grouped.filter(**{f"{GROUP_ALIAS}__in": keys}), query.columns)
    members = members.select_related("experiment", "team").order_by("pk")
    by_key: dict[str, list[Run]] = {}
    first_key: dict[int, str] = {}
    for run in members:
        key = json.dumps(getattr(run, GROUP_ALIAS), sort_keys=True)
        by_key.setdefault(key, []).append(run)
        first_key.setdefault(run.pk, key)
    rows = []
    for first in chosen:
        key = first_key.get(first)
        if key is not None:
            rows.append(group_row(by_key[key], query.columns))
    return Page(rows, total, offset, limit)


def group_row(runs: Sequence[Run], columns: Sequence[Column]) -> Row:
    """A seed group's Row from its member runs (annotated by with_values): each metric column's mean, sample
    std (n - 1; None for fewer than two values) and n; a setting's shared value, the seed column's seeds."""
    members = [Row(values_of(run, columns), run=run) for run in runs]
    values, spread, counts = [], [], []
    for i, column in enumerate(columns):
        cells = [m.values[i] for m in members]
        if column.is_metric:
            numbers = [float(v) for v in cells if v is not None]
            values.append(statistics.fmean(numbers) if numbers else None)
            spread.append(statistics.stdev(numbers) if len(numbers) > 1 else None)
            counts.append(len(numbers))
            continue
        if column.is_seed:
            values.append(sorted({v for v in cells if v is not None}, key=str))
        elif column.kind == "run" and column.key in ("created", "step"):
            values.append(max((v for v in cells if v is not None), default=None))
        else:
            values.append(cells[0])
        spread.append(None)
        counts.append(len(members))
    return Row(values, members=members, spread=spread, counts=counts)


def spec_without_seed(spec: Mapping[str, Any] | None) -> str:
    """What seed repeats share, as canonical JSON: the spec without optim.seed (for runs already loaded)."""
    data = json.loads(json.dumps(spec or {}))
    section = data.get(SEED_PATH[0])
    if isinstance(section, dict):
        section.pop(SEED_PATH[1], None)
    return json.dumps(data, sort_keys=True)


def seed_groups(runs: Sequence[Run]) -> list[list[int]]:
    """The ids of `runs` grouped by spec_without_seed, in the order each group's first run comes."""
    groups: dict[str, list[int]] = {}
    for run in runs:
        groups.setdefault(spec_without_seed(run.spec), []).append(run.pk)
    return list(groups.values())
