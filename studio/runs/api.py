from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response

from studio.accounts import permissions as perms
from studio.datasets.models import Dataset
from studio.experiments import specs
from studio.lib.api_schema import ERROR_404, SHARE, id_parameter, int_parameter, partial_run_spec
from studio.lib.params import QueryError, number_param
from studio.lib.team_api import query_id
from studio.runs import api_docs as docs
from studio.runs import (
    bands,
    episodes,
    exports,
    html_report,
    lifecycle,
    prompt_stat_query,
    queueing,
    rollout_query,
    run_sort,
    table,
    tags,
    texts,
    token_data,
    usage,
)
from studio.runs.access import readable_run
from studio.runs.downsample import DEFAULT_POINTS, MAX_POINTS
from studio.runs.models import (
    KINDS,
    RUN_ACTIONS,
    STATES,
    Checkpoint,
    Rollout,
    Run,
    RunEvent,
    RunRestart,
    with_action_facts,
)
from studio.runs.usage_views import RunUsageSerializer
from studio.sharing.share_view import ShareViewMixin

EVENTS_MAX = 1000
EXPORT_TARGETS = list(exports.TARGETS)  # named here: inside RunViewSet, `exports` is its action


class ScoringFailedSerializer(serializers.Serializer):
    criterion = serializers.CharField()
    failed = serializers.IntegerField(help_text="Rollouts whose score of the criterion carries an error.")
    rollouts = serializers.IntegerField(help_text="The run's rollouts.")


class RunSerializer(serializers.ModelSerializer):
    actions = serializers.SerializerMethodField(
        help_text=f"What can work on the run now, of {', '.join(RUN_ACTIONS)} (cancel: the Stop button); "
        "editors and owners may do them. Run.action_refusals is the rule."
    )
    queue = serializers.SerializerMethodField(
        help_text="What a queued run waits behind when it says nothing itself (waiting_for): no worker on its "
        "queue, or every place taken; empty otherwise."
    )
    tags = serializers.SerializerMethodField(help_text="The run's tags, sorted (POST .../tags/ sets them).")
    usage = serializers.SerializerMethodField(
        help_text="What it used: device- and GPU-seconds, tokens generated and trained, cost (studio.runs.usage)."
    )
    scoring_failed = ScoringFailedSerializer(
        many=True, read_only=True,
        help_text="Criteria that raised on (nearly) every rollout, tallied when the run ended: its reward says little.",
    )  # fmt: skip

    class Meta:
        model = Run
        fields = ["id", "team", "experiment", "kind", "name", "state", "error", "warning", "last_step", "total_steps",
                  "cancel_requested", "restarts", "resumed_from", "resumed_at_step", "last_seq", "created", "started",
                  "finished", "heartbeat", "worker", "placement", "waiting_for", "queue", "spec", "actions",
                  "scoring_failed", "source", "tags", "usage"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(RunUsageSerializer)
    def get_usage(self, run: Run) -> dict:
        return usage.of_run(run)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_tags(self, run: Run) -> list[str]:
        return tags.names(run)  # prefetched by the list (studio.runs.table.with_values)

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(choices=RUN_ACTIONS)))
    def get_actions(self, run: Run) -> list[str]:
        return run.actions()

    def get_queue(self, run: Run) -> str:
        return queueing.waits_behind(run)


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["id", "step", "path", "created"]


class RunRestartSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunRestart
        fields = ["number", "created", "reason", "from_step", "checkpoint", "steps_lost"]


class TableRunSerializer(RunSerializer):
    columns = serializers.SerializerMethodField(
        help_text="{column: value} of each ?col= (and the ?sort= column): a metric's value (null where the run has "
        "none), a setting's (null where its settings lack it)."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "columns"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_columns(self, run: Run) -> dict:
        return getattr(run, "table_columns", {})


@extend_schema_field({"type": "array", "maxItems": tags.TAGS_MAX,
                      "items": {"type": "string", "pattern": tags.TAG_SCHEMA_PATTERN}})  # fmt: skip
class TagListField(serializers.ListField):
    """Any JSON items, each checked by studio.runs.tags.cleaned (which names `tags` for one that is not text); the
    schema states that rule: text, at most TAGS_MAX of them."""


class TagsSerializer(serializers.Serializer):
    tags = TagListField(
        child=serializers.JSONField(), allow_empty=True,  # each checked by studio.runs.tags.cleaned: text only
        help_text=f"The run's tags, all of them (an empty list clears them): at most {tags.TAGS_MAX}, each at most "
        f"{tags.RunTag.NAME_MAX} characters of letters, digits and . _ : / + -.",
    )  # fmt: skip


class RunDetailSerializer(RunSerializer):
    checkpoints = CheckpointSerializer(many=True, read_only=True)
    restart_log = RunRestartSerializer(many=True, read_only=True, help_text="Automatic restarts, oldest first.")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "checkpoints", "restart_log", "provenance", "repeat_of"]
        read_only_fields = fields


class RolloutSerializer(serializers.ModelSerializer):
    prompt = serializers.JSONField(source="run_prompt.content", help_text="Text or a list of chat messages.")
    tools_used = serializers.SerializerMethodField(help_text="Names of the tools the episode called.")
    logprobs = serializers.SerializerMethodField(help_text="The sampler's logprob of each sampled token, when known.")
    teacher_tokens = serializers.SerializerMethodField(
        help_text="On-policy distillation: [[token text, the teacher's reverse KL on it or null], ...] over the "
        "completion's tokens; null without a teacher."
    )

    class Meta:
        model = Rollout
        fields = ["id", "run", "step", "prompt_id", "sample_index", "prompt", "completion", "reward", "advantage",
                  "num_tokens", "finish_reason", "trained", "scores", "logprobs", "turns", "end_reason", "num_turns",
                  "tool_calls", "tool_errors", "tools_used", "ended_at_limit", "hinted", "hint",
                  "hint_fraction", "split", "policy_versions", "staleness", "teacher_tokens"]  # fmt: skip

    def get_tools_used(self, rollout: Rollout) -> list[str]:
        return episodes.unpack_tools(rollout.tools_used)

    @extend_schema_field(serializers.ListField(child=serializers.FloatField(), allow_null=True))
    def get_logprobs(self, rollout: Rollout) -> list[float] | None:
        return token_data.sampled(rollout.logprobs)

    @extend_schema_field(serializers.ListField(child=serializers.ListField(), allow_null=True))
    def get_teacher_tokens(self, rollout: Rollout) -> list | None:
        return token_data.teacher_tokens(rollout.logprobs)


class RolloutDetailSerializer(RolloutSerializer):
    """What the rollout detail answers: the rollout, its group, and which texts were cut."""

    group = serializers.ListField(child=serializers.DictField(), help_text="The group's rollouts, side by side.")
    truncated = serializers.DictField(child=serializers.IntegerField(), help_text="{field: full length} of cut texts.")

    class Meta(RolloutSerializer.Meta):
        fields = [*RolloutSerializer.Meta.fields, "group", "truncated"]


def capped(data: dict) -> dict:
    """`data` with its prompt, completion, turns and hint cut to texts.TEXT_CAP characters per message, and
    `truncated: {field: full length}` naming those cut (the rest: the rollout's text/ endpoint)."""
    fields, truncated = texts.capped({name: data[name] for name in texts.FIELDS if name in data})
    return {**data, **fields, "truncated": truncated}


class RerunSerializer(RunSerializer):
    differences_now = serializers.ListField(
        child=serializers.CharField(), help_text="What differs now from what the run recorded, in words."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "differences_now"]
        read_only_fields = fields


class JsonBooleanField(serializers.BooleanField):
    """true or false as JSON says them: the schema's boolean, not also DRF's "yes", 1, "on"."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)


class CancelRunSerializer(serializers.Serializer):
    checkpoint = JsonBooleanField(
        required=False, default=True,
        help_text="true (the default): the run stops and saves the last whole step's checkpoint; false: it stops "
        "now without saving one (\"Stop now\"). A queued run is cancelled at once either way: it has nothing to save.",
    )  # fmt: skip


class CloneRunSerializer(serializers.Serializer):
    json_schemas = {"overrides": partial_run_spec}  # the API schema describes `overrides` with it
    name = serializers.CharField(required=False)
    overrides = serializers.DictField(required=False, help_text="RunSpec values to change, e.g. {optim: {lr: 1e-4}}.")

    def validate_overrides(self, value):
        errors = specs.section_errors(value)  # each section an object before it is merged into the run's
        if errors:
            raise serializers.ValidationError(errors)
        return value


class EvaluateSerializer(serializers.Serializer):
    dataset = serializers.PrimaryKeyRelatedField(
        queryset=Dataset.objects.all(), required=False, allow_null=True,
        help_text="A held-out dataset of the run's team to evaluate on; empty: the run's own prompts.",
    )  # fmt: skip


def _ids_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, {"type": "string", "pattern": table.IDS_PATTERN}, description=description)


# The runs table's parameters (studio.runs.table), on the list and on its seed groups.
TABLE_PARAMETERS = [
    id_parameter("team", "Only this team's runs."),
    _ids_parameter(table.EXPERIMENT, "Only these experiments' runs: ids separated by commas."),
    _ids_parameter(table.IDS, f"Only these runs: ids separated by commas, at most {table.MAX_IDS} (a sweep's trials)."),
    OpenApiParameter("state", str, enum=[s for s, _ in STATES]), OpenApiParameter("kind", str, enum=[k for k, _ in KINDS]),
    OpenApiParameter(table.COLUMN, {"type": "array", "maxItems": table.MAX_COLUMNS,
                     "items": {"type": "string", "pattern": table.COLUMN_PATTERN}}, explode=True,
                     description="A column, repeatable: last:<metric key>, best:<key> (highest, or lowest for a metric "
                     "better low: losses, KL, timings), max:<key>, min:<key>, at<step>:<key> (the last value at or "
                     "before the step), set:<dotted setting path> (set:optim.lr), run:name|state|step|created."),
    OpenApiParameter(run_sort.SORT, {"type": "string", "pattern": table.SORT_PATTERN}, description="Sort by a column "
                     "(-best:reward/mean), or by a bare metric key's last value (suite/<task>/pass@1); descending with a "
                     "leading -; runs without a value last. Default: newest first."),
    OpenApiParameter(table.TAG, {"type": "array", "items": {"type": "string", "pattern": table.TAG_PATTERN}},
                     explode=True, description="Only runs carrying every tag named."),
]  # fmt: skip
SETTING_FILTERS = ("Settings filter as ?set.<dotted path>=<value> (?set.optim.lr=1e-4: equal to a number, "
                   "true/false/null or text) or =<low>..<high> (?set.optim.lr=1e-5..1e-3, either end may be left out).")  # fmt: skip
BAND = inline_serializer("MetricBand", {
    name: serializers.ListField(child=serializers.FloatField(allow_null=True), help_text=text) for name, text in (
        ("step", "Each point's step (a bucket's first)."), ("mean", "The runs' mean there."),
        ("std", "Their sample std (null under two values)."), ("min", "The lowest value."), ("max", "The highest."),
        ("n", "How many of the runs reported it."))
})  # fmt: skip
MAX_BAND_RUNS = 50


# band's ?ids=: table.IDS_PATTERN's shape, but at least one id and at most MAX_BAND_RUNS.
BAND_IDS_PATTERN = rf"^[ ,]*{table.ID_RULE}[ ]*(,[ ,]*{table.ID_RULE}[ ]*){{0,{MAX_BAND_RUNS - 1}}}[ ,]*$"


def _band_parameters() -> list[OpenApiParameter]:
    return [
        OpenApiParameter(table.IDS, {"type": "string", "pattern": BAND_IDS_PATTERN}, required=True,
                         description=f"The runs, ids separated by commas (1 to {MAX_BAND_RUNS})."),
        OpenApiParameter("key", {"type": "string", "pattern": rf"^[^\x00-\x1f]{{1,{run_sort.KEY_CHARS}}}$"},
                         required=True, description="The metric key, e.g. reward/mean."),
        int_parameter("points", f"Buckets of whole steps, 1 to {MAX_POINTS} (default {DEFAULT_POINTS}).", 1,
                      MAX_POINTS),
    ]  # fmt: skip


GROUP_PAGE = inline_serializer("RunGroupPage", {
    "count": serializers.IntegerField(), "next": serializers.CharField(allow_null=True),
    "previous": serializers.CharField(allow_null=True),
    "results": inline_serializer("RunGroup", {
        "members": serializers.ListField(child=serializers.IntegerField(), help_text="Its runs' ids, oldest first."),
        "columns": serializers.DictField(help_text="{column: {mean, std, n}} of a metric (std: the sample's, null "
                                         "under two values), a setting's shared value, the seeds as a list."),
        "runs": TableRunSerializer(many=True),
    }, many=True),
})  # fmt: skip


@extend_schema_view(list=extend_schema(parameters=TABLE_PARAMETERS, description=SETTING_FILTERS))
class RunViewSet(ShareViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runs (launched from experiments), as the runs table (studio.runs.table) lists them: ?team=&experiment=&ids=
    &state=&kind=&tag=&set.<path>=; ?col=...; ?sort=[-]<column or metric key>; groups/ for seed repeats."""

    serializer_class = TableRunSerializer
    permission_classes = [IsAuthenticated, perms.TeamRole]

    def get_queryset(self):
        runs = (
            perms.visible(with_action_facts(Run.objects.all()), self.request.user)
            .distinct()
            .order_by("-created", "-pk")
        )
        if self.action != "list":  # the list's filters; a run's own actions find it by id alone
            return runs
        team = query_id(self.request.query_params, "team")
        if team is not None:
            runs = runs.filter(team_id=team)
        for name in ("state", "kind"):
            if self.request.query_params.get(name):
                runs = runs.filter(**{name: self.request.query_params[name]})
        return runs

    def _table_page(self, request, query: table.TableQuery) -> table.Page:
        """The table's page over the runs the user may see, each run carrying its columns' values."""
        paginator = self.paginator
        paginator.request, paginator.limit = request, paginator.get_limit(request)
        paginator.offset = paginator.get_offset(request)
        page = table.page(self.get_queryset(), query, offset=paginator.offset, limit=paginator.limit)
        paginator.count = page.total
        spellings = [c.spelling for c in query.columns]
        for run in page.runs:
            run.table_columns = dict(zip(spellings, table.values_of(run, query.columns), strict=True))
        return page

    def list(self, request, *args, **kwargs):
        page = self._table_page(request, table.parse(request.query_params))  # QueryError: 400 naming the parameter
        return self.paginator.get_paginated_response(TableRunSerializer([r.run for r in page.rows], many=True).data)

    @extend_schema(parameters=TABLE_PARAMETERS, description=SETTING_FILTERS, responses=GROUP_PAGE)
    @action(detail=False, methods=["get"])
    def groups(self, request):
        """The runs table grouped by settings: one result per spec without optim.seed (seed repeats), each metric
        column's mean, sample std and n over its runs; sorted by a metric column's mean (?sort=), newest first
        otherwise. The same filters and columns as the list."""
        query = table.grouped(table.parse(request.query_params))  # QueryError: 400 naming the parameter
        page = self._table_page(request, query)
        spellings = [c.spelling for c in query.columns]
        results = []
        for row in page.rows:
            cells = {name: {"mean": value, "std": std, "n": n} if column.is_metric else value
                     for name, column, (value, std, n) in zip(spellings, query.columns, row.cells, strict=True)}  # fmt: skip
            runs = TableRunSerializer([m.run for m in row.members], many=True).data
            results.append({"members": row.ids, "columns": cells, "runs": runs})
        return self.paginator.get_paginated_response(results)

    def get_serializer_class(self):
        # An action's own serializer_class (clone's body) is the view's for that action: keep it.
        return RunDetailSerializer if self.action == "retrieve" else super().get_serializer_class()

    def _editable_run(self) -> Run:
        run = self.get_object()
        perms.check(self.request.user, run, perms.EDIT)
        return run

    @extend_schema(parameters=_band_parameters(), responses={200: BAND, 404: ERROR_404})
    @action(detail=False, methods=["get"])
    def band(self, request):
        """One metric of several runs (seed repeats) as a band: per step their mean, sample std, min, max and n
        (the compare page draws a seed group so). 404 when any run is not one the user may see."""
        params = request.query_params
        ids = table.ids_param(params, table.IDS)  # QueryError: 400 naming ids
        if not 1 <= len(ids) <= MAX_BAND_RUNS:
            raise QueryError(table.IDS, f"name 1 to {MAX_BAND_RUNS} runs")
        key = params.get("key") or ""
        if not 1 <= len(key) <= run_sort.KEY_CHARS or any(ord(c) < 32 for c in key):
            raise QueryError("key", f"a metric key is 1 to {run_sort.KEY_CHARS} characters without control characters")
        points = number_param(params, "points", int)
        if points is not None and not 1 <= points <= MAX_POINTS:
            raise QueryError("points", f"must be between 1 and {MAX_POINTS}")
        if perms.visible(Run.objects.filter(pk__in=ids), request.user).count() != len(ids):
            raise NotFound("not found")  # one of them is not the user's to see: as if none existed
        return Response(bands.band(ids, key, DEFAULT_POINTS if points is None else points))

    @extend_schema(request=TagsSerializer, responses={200: TagsSerializer})
    @action(detail=True, methods=["post"], serializer_class=TagsSerializer)
    def tags(self, request, pk=None):
        """Set the run's tags, all of them (editors and owners; a viewer gets 403)."""
        run = self._editable_run()
        data = TagsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response({"tags": tags.set_tags(run, data.validated_data["tags"])})  # FieldErrors: 400 naming tags

    @extend_schema(request=CancelRunSerializer, responses={200: RunSerializer, 409: docs.CONFLICT})
    @action(detail=True, methods=["post"], serializer_class=CancelRunSerializer)
    def cancel(self, request, pk=None):
        """Stop the run: a queued one is cancelled at once; a running one stops within seconds (a run of one
        process between two sampled tokens; several processes at the end of the step), saving the last whole
        step's checkpoint unless `checkpoint` is false."""
        run = self._editable_run()
        data = CancelRunSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = lifecycle.request_cancel(run, checkpoint=data.validated_data["checkpoint"])  # RunActionError: 409
        return Response(RunSerializer(run).data)

    @extend_schema(request=None, responses={201: RunSerializer, 409: docs.CONFLICT})
    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def resume(self, request, pk=None):
        run = lifecycle.resume(self._editable_run(), request.user)
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=EvaluateSerializer, responses={201: RunSerializer, 409: docs.CONFLICT})
    @action(detail=True, methods=["post"], serializer_class=EvaluateSerializer)
    def evaluate(self, request, pk=None):
        """An evaluation-only run of this run's latest checkpoint: k samples per prompt scored by the rubric, with
        pass@k and bootstrap intervals; on the run's own prompts, or on a held-out `dataset` of the run's team."""
        run = self._editable_run()
        data = EvaluateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        dataset = data.validated_data.get("dataset")
        if dataset is not None and dataset.team_id != run.team_id:
            raise serializers.ValidationError({"dataset": ["must belong to the run's team"]})
        run = lifecycle.evaluate_checkpoint(run, request.user, dataset=dataset)
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=CloneRunSerializer, responses={201: RunSerializer, 409: docs.CONFLICT})
    @action(detail=True, methods=["post"], serializer_class=CloneRunSerializer)
    def clone(self, request, pk=None):
        """A new run with this run's settings and the given overrides (change one thing), in its experiment
        (409 once the experiment was deleted)."""
        source = self._editable_run()
        data = CloneRunSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # SpecError (settings refused with the overrides): 400 naming each field
        run = lifecycle.clone(source, request.user, name=data.validated_data.get("name") or "",
                              overrides=data.validated_data.get("overrides"))  # fmt: skip
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: RerunSerializer, 409: docs.CONFLICT})
    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def rerun(self, request, pk=None):
        """Run again exactly: a new run of this run's pinned inputs (its settings as run, its data as the worker
        snapshotted it, its rubric and environment definitions as they were); `differences_now` says what differs
        now (data files, rows, code, packages). 409 for a run that recorded no provenance."""
        run, notes = lifecycle.rerun_exactly(self._editable_run(), request.user)
        return Response({**RunSerializer(run).data, "differences_now": notes}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: docs.EXPORTS, 409: docs.CONFLICT})
    @action(detail=True, methods=["get"])
    def exports(self, request, pk=None):
        """What each export of the run's settings loses: {trl: {filename, unmapped: [{field, value, default, why}],
        approximate: [...]}, verl: {...}}. The files: export/trl/, export/verl/; the HTML report: report/."""
        return Response(exports.losses(self.get_object()))  # ExportError: 409

    @extend_schema(operation_id="runs_export_file",
                   parameters=[OpenApiParameter("target", str, OpenApiParameter.PATH, enum=EXPORT_TARGETS)],
                   responses={(200, "text/plain"): str, 409: docs.CONFLICT})  # fmt: skip
    @action(detail=True, methods=["get"], url_path=r"export/(?P<target>trl|verl)")
    def export_file(self, request, pk=None, target=None):
        """The run's settings as a TRL GRPOConfig script (trl) or a verl ppo_trainer YAML (verl), as a download;
        every setting with no equivalent is listed in the file's opening comment."""
        made = exports.export(self.get_object(), target)  # ExportError: 409
        # Plain text (the file's name says .py or .yaml): a download, never run or parsed by the browser.
        return _download(made.text, made.filename, "text/plain; charset=utf-8")

    @extend_schema(responses={(200, "text/html"): str})
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        """The run as one self-contained HTML file (curves, chosen rollouts, settings, provenance, notes) that opens
        without the studio, as a download."""
        run = self.get_object()
        return _download(html_report.render(run), html_report.filename(run), "text/html; charset=utf-8")

    @extend_schema(parameters=docs.EVENTS_PARAMETERS, responses=docs.EVENTS)
    @action(detail=True, methods=["get"])
    def events(self, request, pk=None):
        """Stored events after `?after=` (default 0), at most `?limit=` (≤ 1000), and the latest seq."""
        run = self.get_object()
        after = number_param(request.query_params, "after", int) or 0  # QueryError: 400 naming the parameter
        limit = number_param(request.query_params, "limit", int)
        limit = EVENTS_MAX if limit is None else max(1, min(limit, EVENTS_MAX))
        rows = RunEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[:limit]
        return Response({"events": [e.to_message() for e in rows], "cursor": run.last_seq})

    @extend_schema(parameters=docs.ROLLOUT_FILTERS, responses=docs.ROLLOUT_PAGE)
    @action(detail=True, methods=["get"], permission_classes=[AllowAny])
    def rollouts(self, request, pk=None):
        """Keyset-paginated rollout summaries; see studio.runs.rollout_query for the filters."""
        run = readable_run(request, pk)  # members, or a live share link (read-only)
        return Response(rollout_query.page(run.pk, request.query_params, rollout_query.default_split(run.kind)))

    @extend_schema(
        operation_id="runs_rollout_detail", parameters=[docs.ROLLOUT_ID, SHARE], responses=RolloutDetailSerializer
    )
    @action(detail=True, methods=["get"], url_path=r"rollouts/(?P<rollout_id>\d+)", permission_classes=[AllowAny])
    def rollout(self, request, pk=None, rollout_id=None):
        """One rollout, with `group`: the other completions of its (step, prompt_id), shown side by side.

        `turns` (multi-turn episodes, else null) holds each turn: its text, tool calls with their
        arguments and result or error, the observation (not trained on), reward, reason, advantage.
        `policy_versions` ([[version, tokens], ...] in token order) and `staleness` (versions behind the
        weights its step trained from) say which weights sampled it in an asynchronous run; null otherwise.
        Prompt, completion (the group's too) and each text of the turns carry at most 20,000 characters;
        `truncated` names each field cut, with its full length, to be read from `.../text/`."""
        run = readable_run(request, pk)  # members, or a live share link (read-only)
        rollout = get_object_or_404(Rollout.objects.select_related("run_prompt"), run=run, pk=rollout_id)
        # Same split too: a validation prompt's id is its row in the held-out data, which a training row may share.
        group = Rollout.objects.filter(run=run, step=rollout.step, prompt_id=rollout.prompt_id, split=rollout.split)
        group = group.order_by("sample_index")
        group = group.select_related("run_prompt").defer("logprobs", "turns", "policy_versions", "run_prompt__content")
        data = capped(RolloutSerializer(rollout).data)
        data["group"] = [capped({**r.summary(), "completion": r.completion}) for r in group]
        return Response(data)

    @extend_schema(parameters=docs.PROMPT_FILTERS, responses=docs.PROMPT_PAGE)
    @action(detail=True, methods=["get"], permission_classes=[AllowAny])
    def prompts(self, request, pk=None):
        """The run's per-prompt statistics, keyset-paginated: `?order=` pass_rate | pass_rate_std |
        draws | last_step (a leading "-" for descending; default -last_step), `?status=` unseen |
        solved | learnable | never_solved, `?limit=` (<= 200), `?cursor=`. Each row carries its
        prompt's preview and its newest history entries ([step, passed, samples]); `counts` holds
        the run's prompts per status."""
        run = readable_run(request, pk)  # members, or a live share link (read-only)
        return Response(prompt_stat_query.page(run, request.query_params))

    @extend_schema(operation_id="runs_prompt_detail", parameters=[SHARE], responses=docs.PROMPT_DETAIL)
    @action(detail=True, methods=["get"], url_path=r"prompts/(?P<prompt_id>.+)", permission_classes=[AllowAny])
    def prompt(self, request, pk=None, prompt_id=None):
        """One prompt's statistics with its whole stored history ([step, passed, samples], oldest first)."""
        run = readable_run(request, pk)  # members, or a live share link (read-only)
        data = prompt_stat_query.detail(run, prompt_id)
        if data is None:
            return Response({"detail": "not found"}, status=status.HTTP_404_NOT_FOUND)
        return Response(data)

    @extend_schema(
        operation_id="runs_rollout_text",
        parameters=[docs.ROLLOUT_ID, *docs.TEXT_PARAMETERS],
        responses=docs.ROLLOUT_TEXT,
    )
    @action(detail=True, methods=["get"], url_path=r"rollouts/(?P<rollout_id>\d+)/text", permission_classes=[AllowAny])
    def rollout_text(self, request, pk=None, rollout_id=None):
        """The full text of one field of a rollout, `?field=prompt|completion|turns|hint`, in windows: each
        message's (each text of each turn's) characters [offset, offset + limit) (limit ≤ 1,000,000), and `next_offset` while
        any message goes on. Readable by whoever may read the rollout."""
        run = readable_run(request, pk)  # members, or a live share link (read-only)
        field, offset, limit = _text_window(request.query_params)
        rollout = get_object_or_404(Rollout.objects.select_related("run_prompt"), run=run, pk=rollout_id)
        value = rollout.run_prompt.content if field == "prompt" else getattr(rollout, field)
        window, more = texts.field_window(field, value, offset, limit)
        return Response({"field": field, "chars": texts.field_chars(field, value), "offset": offset, "limit": limit,
                         "value": window, "next_offset": offset + limit if more else None})  # fmt: skip


def _download(text: str, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(text, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _text_window(params) -> tuple[str, int, int]:
    field = params.get("field")
    if field not in texts.FIELDS:
        raise QueryError("field", f"must be one of {', '.join(texts.FIELDS)}")
    offset = number_param(params, "offset", int) or 0
    if offset < 0:
        raise QueryError("offset", "must be 0 or more")
    limit = number_param(params, "limit", int) or texts.WINDOW_MAX
    if not 1 <= limit <= texts.WINDOW_MAX:
        raise QueryError("limit", f"must be between 1 and {texts.WINDOW_MAX:,}")
    return field, offset, limit
