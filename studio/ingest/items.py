"""What one ingest batch may hold, checked for type and size before anything is written.

A batch is `{"batch_id": "...", "items": [...]}`; each item has a `kind`:

- metrics   {step, values: {key: number}, wall_time?}
- rollouts  {step, rollouts: [{prompt, completion, reward, scores?, advantage?, prompt_id?, sample_index?,
             num_tokens?, finish_reason?, split?, trained?, logprobs?}]}
- episodes  {step, episodes: [{prompt, turns: [{text, tool_calls?, observation?, reward?, ...}], reward, ...}]}
- status    {state: running | succeeded | failed | cancelled, detail?}
- log       {lines: [text]}
- settings  {settings: {...}, criteria?: [name], total_steps?}

The serializers document the API (drf-spectacular) and check each item; `to_rollout` turns a checked
rollout or episode into the trainers.report.Rollout the studio's writer stores (studio.runs.reports).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from rest_framework import serializers

from studio.lib.fields import FiniteDictField, JSONField
from studio.runs.models import SPLITS
from trainers.report import CriterionScore, Rollout

MAX_ITEMS = 10_000
MAX_ROLLOUTS = 5_000  # per item
MAX_TEXT = 1_000_000  # characters of one prompt, completion or turn
MAX_LINES = 2_000
MAX_KEYS = 1_000
MAX_STEP = 2**31 - 1
STATES = ("running", "succeeded", "failed", "cancelled")
EXTERNAL_SOURCES = ("trl", "verl", "api")  # Run.source of a run trained outside the studio
FINISH_REASONS = ("stop", "length", "error", "abort", "tool_calls")
END_REASONS = ("done", "turn_limit", "token_budget", "length", "error")


def finite(value: float) -> float:
    if not math.isfinite(value):
        raise serializers.ValidationError("must be a finite number")
    return value


def text_or_messages(value: Any, field: str) -> Any:
    """A prompt or completion: text, or a list of chat messages ({role, content} with text content)."""
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise serializers.ValidationError({field: f"at most {MAX_TEXT:,} characters"})
        return value
    if (
        isinstance(value, list)
        and value
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content", ""), str)
            for m in value
        )
    ):
        if sum(len(m.get("content", "")) for m in value) > MAX_TEXT:
            raise serializers.ValidationError({field: f"at most {MAX_TEXT:,} characters"})
        return [{"role": m["role"][:40], "content": m.get("content", "")} for m in value]
    raise serializers.ValidationError({field: "text, or a list of chat messages ({role, content})"})


class ScoreField(serializers.Field):
    """A criterion's score: a number, null (no score: an error), or {score, explanation?, error?}."""

    default_error_messages = {"invalid": "a number, null, or {{score, explanation, error}}"}

    def to_internal_value(self, data: Any) -> CriterionScore:
        if data is None:
            return CriterionScore(0.0, error="no score")
        if isinstance(data, int | float) and not isinstance(data, bool) and math.isfinite(data):
            return CriterionScore(float(data))
        if isinstance(data, dict) and set(data) <= {"score", "explanation", "error"}:
            score, explanation, error = data.get("score"), data.get("explanation") or "", data.get("error")
            if score is None:
                return CriterionScore(0.0, explanation=str(explanation)[:10_000], error=str(error or "no score")[:2000])
            number = isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score)
            if number and isinstance(explanation, str) and (error is None or isinstance(error, str)):
                return CriterionScore(float(score), explanation[:10_000], None if error is None else error[:2000])
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class RolloutIn(serializers.Serializer):
    prompt = JSONField(help_text="Text, or a list of chat messages ({role, content}).")
    completion = JSONField(help_text="Text, or a list of chat messages ({role, content}).")
    reward = serializers.FloatField(validators=[finite])
    scores = serializers.DictField(child=ScoreField(), required=False, default=dict,
                                   help_text="{criterion: number | null | {score, explanation, error}}.")  # fmt: skip
    advantage = serializers.FloatField(required=False, default=0.0, validators=[finite])
    prompt_id = serializers.CharField(required=False, max_length=200,
                                      help_text="Names the prompt's group within its step; default: from the prompt's text.")  # fmt: skip
    sample_index = serializers.IntegerField(required=False, min_value=0, max_value=MAX_STEP,
                                            help_text="Its place in the group; default: its order in this item.")  # fmt: skip
    num_tokens = serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_STEP)
    finish_reason = serializers.ChoiceField(choices=FINISH_REASONS, required=False, default="stop")
    split = serializers.ChoiceField(choices=[s for s, _ in SPLITS], required=False, default="train")
    trained = serializers.BooleanField(required=False, default=True)
    logprobs = serializers.ListField(child=serializers.FloatField(), required=False, allow_null=True,
                                     max_length=1_000_000, default=None)  # fmt: skip

    def validate_prompt(self, value):
        return text_or_messages(value, "prompt")

    def validate_completion(self, value):
        return text_or_messages(value, "completion")

    def validate_scores(self, value):
        if len(value) > 64:
            raise serializers.ValidationError("at most 64 criteria")
        if any(not name or len(name) > 64 for name in value):
            raise serializers.ValidationError("criterion names have 1 to 64 characters")
        return value


class ToolCallIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    arguments = FiniteDictField(required=False, default=dict)
    result = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=MAX_TEXT, trim_whitespace=False
    )
    error = serializers.CharField(required=False, default=None, allow_null=True, max_length=10_000)
    seconds = serializers.FloatField(required=False, default=0.0, min_value=0, validators=[finite])
    truncated = serializers.BooleanField(required=False, default=False)


class TurnIn(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, max_length=MAX_TEXT, trim_whitespace=False)
    num_tokens = serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_STEP)
    finish_reason = serializers.ChoiceField(choices=FINISH_REASONS, required=False, default="stop")
    tool_calls = ToolCallIn(many=True, required=False, default=list)
    observation = JSONField(required=False, default=list,
                                        help_text="What followed the turn (tool results, a user's reply): chat messages.")  # fmt: skip
    observation_tokens = serializers.IntegerField(required=False, default=0, min_value=0, max_value=MAX_STEP)
    reward = serializers.FloatField(required=False, default=0.0, validators=[finite])
    reason = serializers.CharField(required=False, default="", allow_blank=True, max_length=10_000)
    advantage = serializers.FloatField(required=False, default=0.0, validators=[finite])
    answered = serializers.BooleanField(required=False, default=False)

    def validate_observation(self, value):
        return [] if value in (None, []) else text_or_messages(value, "observation")


class EpisodeIn(RolloutIn):
    completion = JSONField(required=False, help_text="Default: the last turn's text.")
    turns = TurnIn(many=True, help_text="The model's turns, each with what followed it.")
    end_reason = serializers.ChoiceField(choices=END_REASONS, required=False, default="done")

    def validate_turns(self, value):
        if not value or len(value) > 1000:
            raise serializers.ValidationError("1 to 1000 turns")
        return value

    def validate(self, attrs):
        attrs.setdefault("completion", attrs["turns"][-1]["text"])
        return attrs


class StepItem(serializers.Serializer):
    step = serializers.IntegerField(min_value=0, max_value=MAX_STEP)


class MetricsItem(StepItem):
    kind = serializers.ChoiceField(choices=["metrics"])
    values = serializers.DictField(child=serializers.FloatField(validators=[finite]), help_text="{key: value}")
    wall_time = serializers.FloatField(required=False, min_value=0, validators=[finite],
                                       help_text="When they were measured (epoch seconds); default: now.")  # fmt: skip

    def validate_values(self, value):
        if not value or len(value) > MAX_KEYS:
            raise serializers.ValidationError(f"1 to {MAX_KEYS} keys")
        if any(not key or len(key) > 200 for key in value):
            raise serializers.ValidationError("keys have 1 to 200 characters")
        return value


class RolloutsItem(StepItem):
    kind = serializers.ChoiceField(choices=["rollouts"])
    rollouts = RolloutIn(many=True, max_length=MAX_ROLLOUTS, allow_empty=False)


class EpisodesItem(StepItem):
    kind = serializers.ChoiceField(choices=["episodes"])
    episodes = EpisodeIn(many=True, max_length=MAX_ROLLOUTS, allow_empty=False)


class StatusItem(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["status"])
    state = serializers.ChoiceField(choices=STATES)
    detail = serializers.CharField(required=False, default="", allow_blank=True, max_length=10_000)


class LogItem(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["log"])
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True, max_length=100_000, trim_whitespace=False),
                                  max_length=MAX_LINES, allow_empty=False)  # fmt: skip


class SettingsItem(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["settings"])
    settings = FiniteDictField(help_text="The trainer's settings, shown and compared as the run's settings.")
    criteria = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=64)
    total_steps = serializers.IntegerField(required=False, min_value=0, max_value=MAX_STEP)

    def validate_settings(self, value):
        if len(json.dumps(value)) > 1_000_000:
            raise serializers.ValidationError("at most 1 MB of settings")
        return value


BATCH_ID = r"^[\w.:@/-]{1,100}$"
BATCH_ID_HELP = ("The client's id of the batch (1 to 100 of A-Z a-z 0-9 _ . : @ / -): a batch id is stored once, so a "
                 "retry after a dropped connection stores nothing twice.")  # fmt: skip
ITEMS: dict[str, type[serializers.Serializer]] = {
    "metrics": MetricsItem, "rollouts": RolloutsItem, "episodes": EpisodesItem, "status": StatusItem,
    "log": LogItem, "settings": SettingsItem,
}  # fmt: skip


class BatchIn(serializers.Serializer):
    batch_id = serializers.RegexField(BATCH_ID, required=False, help_text=BATCH_ID_HELP)
    items = serializers.ListField(child=serializers.DictField(), max_length=MAX_ITEMS, allow_empty=False)

    def validate_items(self, items):
        checked, errors = [], {}
        for index, item in enumerate(items):
            kind = ITEMS.get(item.get("kind"))
            if kind is None:
                errors[str(index)] = {"kind": [f"one of {', '.join(ITEMS)}"]}
                continue
            one = kind(data=item)
            if one.is_valid():
                checked.append(one.validated_data)
            else:
                errors[str(index)] = one.errors
        if errors:
            raise serializers.ValidationError(errors)
        return checked


def body_digest(items: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()


def group_of(prompt: Any) -> str:
    return "p-" + hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:12]


def to_rollouts(step: int, rows: list[dict[str, Any]]) -> list[Rollout]:
    """Checked rollouts or episodes of one item as trainers.report.Rollout; a missing prompt_id is the prompt's
    digest and a missing sample_index its order among the item's rollouts of that prompt."""
    counts: dict[str, int] = {}
    out = []
    for row in rows:
        group = row.get("prompt_id") or group_of(row["prompt"])
        index = row.get("sample_index")
        if index is None:
            index = counts.get(group, 0)
        counts[group] = max(counts.get(group, 0), index + 1)
        turns = row.get("turns")
        out.append(Rollout(
            step=step, prompt_id=group, sample_index=index, prompt=row["prompt"], completion=row["completion"],
            reward=row["reward"], scores=dict(row.get("scores") or {}), advantage=row.get("advantage", 0.0),
            num_tokens=row.get("num_tokens") or sum(t["num_tokens"] for t in turns or []),
            finish_reason=row.get("finish_reason", "stop"), logprobs=row.get("logprobs"),
            trained=row.get("trained", True), split=row.get("split", "train"),
            turns=[dict(t, tool_calls=[dict(c) for c in t["tool_calls"]]) for t in turns] if turns else None,
            end_reason=row.get("end_reason") if turns else None,
        ))  # fmt: skip
    return out
