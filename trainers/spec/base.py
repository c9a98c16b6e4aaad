"""What every settings section shares: strict models, and errors placed beside the field they concern."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def field_error(model: BaseModel, field: str, message: str) -> ValidationError:
    """An error a model validator raises under one of its fields (so forms show it beside that field)."""
    details = InitErrorDetails(type=custom_error(message), loc=(field,), input=getattr(model, field))
    return ValidationError.from_exception_data(type(model).__name__, [details])


def error_at(model: BaseModel, loc: tuple[str, ...], value: Any, message: str) -> ValidationError:
    """An error a model validator raises at a nested field (`loc`), so forms show it beside that field."""
    details = InitErrorDetails(type=custom_error(message), loc=loc, input=value)
    return ValidationError.from_exception_data(type(model).__name__, [details])


def located(exc: ValidationError, *prefix: str) -> ValidationError:
    """`exc` with each error's location under `prefix`."""
    details = [
        InitErrorDetails(type=custom_error(err["msg"].removeprefix("Value error, ")), loc=(*prefix, *err["loc"]),
                         input=err.get("input"))
        for err in exc.errors()
    ]  # fmt: skip
    return ValidationError.from_exception_data(exc.title, details)


def custom_error(text: str) -> PydanticCustomError:
    return PydanticCustomError("value_error", text.replace("{", "{{").replace("}", "}}"))


def choice(catalog: dict[str, str], value: str, what: str) -> str:
    if value not in catalog:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(catalog)}")
    return value


def validation_errors(exc: ValidationError) -> dict[str, str]:
    """Flatten pydantic errors to {"algorithm.clip_ratio_low": "Input should be ..."} for forms and APIs."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "__all__"
        out[loc] = err["msg"].removeprefix("Value error, ")
    return out
