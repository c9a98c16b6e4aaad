"""Serializer fields that bound what the database could not hold: an id past a signed 64-bit
integer is refused under its field's name (400), never sent to the database (OverflowError, 500);
JSON (a form field's text, or a value) nested past the limit or holding a number that is not
finite is refused the same way (studio.lib.json_limits)."""

from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework import serializers

from studio.lib import json_limits
from studio.lib.params import MAX_ID, MIN_INT


class IdField(serializers.IntegerField):
    """The id of a row: a whole number from 1 to MAX_ID."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


class BoundedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A PrimaryKeyRelatedField whose out-of-range number reads as "does not exist"."""

    def to_internal_value(self, data: Any) -> Any:
        number = data if isinstance(data, int) and not isinstance(data, bool) else None
        if isinstance(data, float):  # JSON's 1e30 or NaN: int() of it overflows or fails
            if not data.is_integer():
                self.fail("incorrect_type", data_type=type(data).__name__)
            number = int(data)
        elif isinstance(data, str) and data.strip().lstrip("+-").isdecimal():
            try:
                number = int(data)
            except ValueError:  # more digits than int() reads
                self.fail("does_not_exist", pk_value=data)
        if number is not None and not MIN_INT <= number <= MAX_ID:
            self.fail("does_not_exist", pk_value=data)
        return super().to_internal_value(data)


def finite_json(value: Any) -> Any:
    """A validator: refuse a value holding an infinite or NaN number (JSON has none: the database's
    JSON check would fail on it), naming where it is."""
    where = json_limits.find_non_finite(value)
    if where is not None:
        raise serializers.ValidationError(
            f"{where} is not a finite number: JSON stores no Infinity or NaN; send a finite number or null"
        )
    return value


class JSONField(serializers.JSONField):
    """DRF's JSONField, except that a form body's "null" (parsed only after DRF's null check) is
    refused where null is, instead of reaching a NOT NULL column; a form body's text is parsed within
    the JSON limits, and a value holding a number that is not finite is refused."""

    def to_internal_value(self, data: Any) -> Any:
        if self.binary or getattr(data, "is_json_string", False):  # text to parse (DRF would json.loads it)
            try:
                value = json_limits.loads(data)
            except json_limits.JSONLimitError as exc:  # say which limit, not "invalid"
                raise serializers.ValidationError(str(exc), code=exc.limit) from None
            except (TypeError, ValueError):
                self.fail("invalid")
        else:  # named where it is, rather than DRF's "Value must be valid JSON."
            value = super().to_internal_value(finite_json(data))
        if value is None and not self.allow_null:
            self.fail("null")
        return value


class FiniteDictField(serializers.DictField):
    """DRF's DictField whose values hold only finite numbers (settings, tool-call arguments)."""

    default_validators = [finite_json]


class StudioModelSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose JSON model fields use the JSONField above."""

    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping, models.JSONField: JSONField}
