"""Teachers for on-policy distillation: the models (or endpoints) whose logprobs of the student's sampled
tokens give a per-token signal (`algorithm.distill_signal`, weighted by `algorithm.distill_coef`)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from trainers.access import ENDPOINT, MODEL, marks
from trainers.spec.base import Section, error_at, field_error
from trainers.spec.model import model_path_shape_error

MAX_TEACHERS = 8


class TeacherModelSpec(Section):
    """One teacher: a model the worker loads (a folder, a hub id, another run's checkpoint) or an
    OpenAI-compatible endpoint that returns prompt logprobs (completions with echo and logprobs, as vLLM's
    server does). Its tokenizer must be the student's: the run refuses another one, in words, at start."""

    name: str = Field(
        "teacher",
        pattern=r"^[A-Za-z0-9_.-]{1,40}$",
        description="Label of this teacher in the metrics (distill/reverse_kl/<name>) and the inspector.",
    )
    path: str | None = Field(
        None,
        description="A model folder, a hub id, or another run's checkpoint folder, loaded on the trainer's devices "
        "(frozen). Empty: an endpoint (base_url).",
        json_schema_extra=marks(MODEL),
    )
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint (…/v1) scoring the student's tokens: POST /completions with the "
        "token ids, echo and logprobs. Its host must be on the operator's list (the completions are sent there).",
        json_schema_extra=marks(ENDPOINT),
    )
    model: str | None = Field(None, description="The endpoint's model name (with base_url).")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=r"^[A-Z][A-Z0-9_]*API_KEY$",
        description="Environment variable holding the endpoint's API key (as the judges': sent only to the "
        "server in the matching *_BASE_URL variable the workers' operator set beside it).",
    )
    timeout_s: float = Field(120.0, gt=0, le=600, description="Per-request time limit of the endpoint.")
    weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Where several teachers score the same rows, each token's signal is their weighted mean.",
    )
    rows: list[str] | None = Field(
        None,
        description="Multi-teacher: this teacher scores only rows whose teacher.route_field holds one of these "
        "values. Empty: every row no other teacher claims.",
    )

    @field_validator("path")
    @classmethod
    def _folder_or_hub_id(cls, v: str | None) -> str | None:
        error = model_path_shape_error(v) if v else None
        if error:
            raise ValueError(error)
        return v or None

    @model_validator(mode="after")
    def _one_source(self) -> TeacherModelSpec:
        if bool(self.path) == bool(self.base_url):
            raise field_error(self, "path", "set a model (path) or an endpoint (base_url) for the teacher, not both")
        if self.base_url and not self.model:
            raise field_error(self, "model", "name the endpoint's model (model) for a teacher at base_url")
        if self.rows is not None and not self.rows:
            raise field_error(self, "rows", "list the route_field values this teacher scores, or leave rows empty")
        return self


class TeacherSpec(Section):
    """On-policy distillation (Agarwal et al., GKD, arXiv:2306.13649; Thinking Machines' "On-Policy
    Distillation", 2025): the student samples, each teacher scores the sampled tokens, and the per-token
    reverse KL log pi_student - log pi_teacher joins the advantage (algorithm.distill_coef). With
    algorithm.reward_advantage_weight 0 it is the whole signal (pure distillation: the rubric is reported
    only); otherwise it sits beside the rubric's advantage."""

    teachers: list[TeacherModelSpec] = Field(
        ...,
        min_length=1,
        max_length=MAX_TEACHERS,
        description='Teachers, as a JSON list: [{"name": "big", "path": "/models/big"}] or '
        '[{"name": "api", "base_url": "http://host:8000/v1", "model": "big"}]; with route_field, each names the '
        'rows it scores ("rows": ["math"]).',
    )
    route_field: str | None = Field(
        None,
        description="Multi-teacher: the row field (answer, or one of data.extra_fields) whose value picks the "
        "teacher of each row (teachers' rows). Empty: every teacher scores every row.",
    )

    @model_validator(mode="after")
    def _teachers_fit(self) -> TeacherSpec:
        names = [t.name for t in self.teachers]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise error_at(self, ("teachers", str(i), "name"), name, f"two teachers are named {name!r}")
        routed = [i for i, t in enumerate(self.teachers) if t.rows is not None]
        if routed and not self.route_field:
            raise error_at(self, ("route_field",), None, "teachers with rows need a route_field to read them from")
        claimed: dict[str, str] = {}
        for i in routed:
            for value in self.teachers[i].rows or []:
                if value in claimed:
                    raise error_at(self, ("teachers", str(i), "rows"), value,
                                   f"rows {value!r} are claimed by teacher {claimed[value]!r} already")  # fmt: skip
                claimed[value] = self.teachers[i].name
        return self

    @property
    def endpoints(self) -> list[TeacherModelSpec]:
        return [t for t in self.teachers if t.base_url]
