"""What the runs API's schema says about its actions: their query parameters (read from the same
constants the queries use, so they cannot drift) and the shapes of their answers."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers

from studio.lib.api_schema import SHARE, error, flag_parameter, id_parameter, int_parameter
from studio.runs import prompt_stat_query, rollout_query, texts
from studio.runs.prompt_stats import STATUS_NAMES

QUERY = OpenApiParameter.QUERY
CONFLICT = error("The run's state does not allow this (e.g. cancelling a finished run).")


def _flag(name: str, description: str) -> OpenApiParameter:
    return flag_parameter(name, f"{description} (true or false).")


def _number(name: str, kind: type, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.INT if kind is int else OpenApiTypes.NUMBER, QUERY,
                            description=description)  # fmt: skip


ROLLOUT_FILTERS = [
    OpenApiParameter("order", str, QUERY, enum=list(rollout_query.ORDERS),
                     description=f"Sort order; default {rollout_query.DEFAULT_ORDER}."),
    OpenApiParameter("limit", OpenApiTypes.INT, QUERY, description=f"Page size, at most {rollout_query.MAX_LIMIT}."),
    OpenApiParameter("cursor", str, QUERY, description="`next_cursor` of the page before."),
    OpenApiParameter(rollout_query.SPLIT, str, QUERY, enum=list(rollout_query.SPLIT_CHOICES),
                     description=f"Which rollouts; default {rollout_query.DEFAULT_SPLIT} "
                                 f"({rollout_query.default_split('eval')} for an evaluation run)."),
    *(_number(param, kind, f"The rollout's {field} is at {'least' if side == 'min' else 'most'} this.")
      for param, (field, side, kind) in rollout_query.BOUNDS.items()),
    *(OpenApiParameter(name, str, QUERY, description=f"{name} equals this.") for name in rollout_query.EQUALS),
    *(_flag(name, f"Only rollouts whose {name} is this") for name in (*rollout_query.FLAGS, *rollout_query.COUNTS)),
    *(OpenApiParameter(param, str, QUERY, description=f"{field} holds this name.")
      for param, field in rollout_query.MEMBERS.items()),
    OpenApiParameter(rollout_query.CRITERION, str, QUERY, description="Scored on this criterion."),
    _number(rollout_query.SCORE_MIN, float, "That criterion's score is at least this."),
    _number(rollout_query.SCORE_MAX, float, "That criterion's score is at most this."),
    OpenApiParameter(rollout_query.PROMPT, str, QUERY, description="A dataset row's id (its repeats too)."),
    OpenApiParameter(rollout_query.TEXT, str, QUERY, description="Text in the prompt or completion, any case."),
    _flag(rollout_query.HAS_NOTE, "Only rollouts with a note"),
    OpenApiParameter(rollout_query.NOTE_TAG, str, QUERY, description="Only rollouts with a note of this tag."),
    SHARE,
]  # fmt: skip

PROMPT_FILTERS = [
    OpenApiParameter("order", str, QUERY, enum=list(prompt_stat_query.ORDERS),
                     description=f"Sort order; default {prompt_stat_query.DEFAULT_ORDER}."),
    OpenApiParameter(prompt_stat_query.STATUS, str, QUERY, enum=list(STATUS_NAMES)),
    OpenApiParameter("limit", OpenApiTypes.INT, QUERY, description=f"Page size, at most {prompt_stat_query.MAX_LIMIT}."),
    OpenApiParameter("cursor", str, QUERY, description="`next_cursor` of the page before."),
    SHARE,
]  # fmt: skip

EVENTS_PARAMETERS = [
    _number("after", int, "Events after this seq (default 0)."),
    _number("limit", int, "At most this many (1 to 1000, default 1000)."),
]

TEXT_PARAMETERS = [
    OpenApiParameter("field", str, QUERY, required=True, enum=list(texts.FIELDS), description="Which text."),
    int_parameter("offset", "The first character of each message to return (default 0).", minimum=0),
    int_parameter("limit", f"Characters per message (1 to {texts.WINDOW_MAX:,}, the default).", 1, texts.WINDOW_MAX),
    SHARE,
]

EVENTS = inline_serializer("RunEvents", {
    "events": serializers.ListField(child=inline_serializer("RunEvent", {
        "seq": serializers.IntegerField(), "kind": serializers.CharField(),
        "step": serializers.IntegerField(allow_null=True), "time": serializers.FloatField(),
        "data": serializers.JSONField(),
    })),
    "cursor": serializers.IntegerField(help_text="The run's latest seq."),
})  # fmt: skip

ROLLOUT_PAGE = inline_serializer("RolloutPage", {
    "results": serializers.ListField(child=serializers.DictField(), help_text="Rollout summaries."),
    "next_cursor": serializers.CharField(allow_null=True, help_text="The next page's cursor; null on the last."),
})  # fmt: skip

PROMPT_PAGE = inline_serializer("PromptStatPage", {
    "results": serializers.ListField(child=serializers.DictField(), help_text="Per-prompt statistics."),
    "next_cursor": serializers.CharField(allow_null=True, help_text="The next page's cursor; null on the last."),
    "counts": serializers.DictField(child=serializers.IntegerField(), help_text="The run's prompts per status."),
})  # fmt: skip

PROMPT_DETAIL = inline_serializer("PromptStatDetail", {
    "prompt_id": serializers.CharField(),
    "history": serializers.ListField(child=serializers.JSONField(), help_text="[step, passed, samples], oldest first."),
})  # fmt: skip

ROLLOUT_TEXT = inline_serializer("RolloutText", {
    "field": serializers.ChoiceField(choices=list(texts.FIELDS)),
    "chars": serializers.JSONField(help_text="The full length of the field (per message, per turn)."),
    "offset": serializers.IntegerField(),
    "limit": serializers.IntegerField(),
    "value": serializers.JSONField(help_text="The window of the field's text(s)."),
    "next_offset": serializers.IntegerField(allow_null=True, help_text="Where the next window starts; null at the end."),
})  # fmt: skip

ROLLOUT_ID = id_parameter("rollout_id", "A rollout of the run.", OpenApiParameter.PATH)

_EXPORT_LOSSES = inline_serializer("ExportLosses", {
    "target": serializers.CharField(), "filename": serializers.CharField(),
    "unmapped": serializers.ListField(child=inline_serializer("UnmappedSetting", {
        "field": serializers.CharField(), "value": serializers.JSONField(),
        "default": serializers.BooleanField(help_text="Whether the run left it at the schema's default."),
        "why": serializers.CharField(),
    }), help_text="Every setting of the run with no equivalent in the target: what the export loses."),
    "approximate": serializers.ListField(child=serializers.CharField(), help_text="Settings carried over with a difference."),
})  # fmt: skip
EXPORTS = inline_serializer("RunExports", {"trl": _EXPORT_LOSSES, "verl": _EXPORT_LOSSES})
