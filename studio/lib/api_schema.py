"""The OpenAPI schema's shared parts: the error answers every operation can give, added to each
operation by `StudioAutoSchema` from what the operation takes, so no view repeats them.

- 400 `FieldErrors`: {field: message(s)}, the field dotted for nested settings ("config.model"),
  for every operation that reads a body or query parameters;
- 403 `Error`: not signed in, or a role in the team too low for the operation;
- 404 `Error`: an id in the path that names nothing this user may see.

An operation documents its other answers (409, 502, 504...) with @extend_schema, or, for answers
that views of one base class share, in the view's `error_responses`.

Requests are described as strictly as the serializers check them, so a request the schema accepts is
one the server takes but for what a schema cannot say (an id that names nothing, a name taken, a rule
between two fields: those are stated in the fields' descriptions):
- a text field refuses the NUL character (DRF's ProhibitNullCharactersValidator): a pattern says so;
- a JSON field that the serializer validates with a trainer schema (pydantic) is described by it: the
  serializer names the model in `json_schemas` ({field: model}), the schema shows the model's own JSON
  schema (bounds, choices, required keys, no unknown keys), turned from JSON Schema 2020-12 into the
  OpenAPI 3.0 dialect this schema is written in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from pydantic import BaseModel
from rest_framework import serializers

from studio.lib.params import MAX_ID, MIN_INT
from studio.lib.schema_form import CATALOG_CHOICES
from trainers.data.procedural.catalog import TASKS
from trainers.rewards.catalog import CRITERION_KINDS
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, TOOL_KINDS
from trainers.spec import RunSpec

NO_NUL = r"^[^\x00]*$"  # DRF refuses "\x00" in every text field
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"  # ... and, where blank is refused, one of only spaces (it trims them)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong.")


FIELD_ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="The request is refused: each key names a field (dotted for a nested setting, e.g. "
    '"config.model"; "detail" or "non_field_errors" for the whole request) and holds why, as a message '
    "or a list of messages (nested objects for nested fields).",
)
ERROR_403 = OpenApiResponse(ErrorSerializer, description="Not signed in, or your role cannot do this.")
ERROR_404 = OpenApiResponse(ErrorSerializer, description="Nothing with this id that you may see.")
NO_403 = ("/api/token/",)  # signing in: open to all, refuses with 400


def error(description: str) -> OpenApiResponse:
    """An {"detail": ...} answer with its own description (409, 502, 504...)."""
    return OpenApiResponse(ErrorSerializer, description=description)


def id_parameter(name: str, description: str, location: str = OpenApiParameter.QUERY) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "integer", "minimum": 1, "maximum": MAX_ID}, location, description=description
    )


def int_parameter(name: str, description: str, minimum: int = MIN_INT, maximum: int = MAX_ID) -> OpenApiParameter:
    """A whole-number query parameter read with `params.number_param(..., int)` and these bounds."""
    return OpenApiParameter(name, {"type": "integer", "minimum": minimum, "maximum": maximum}, description=description)


def flag_parameter(name: str, description: str) -> OpenApiParameter:
    """A query parameter read with `params.flag_param`: true or false (also 1/0, yes/no, on/off)."""
    return OpenApiParameter(name, bool, description=description)


SHARE = OpenApiParameter("share", str, description="A live share link's token: read without signing in.")


def openapi_30(schema: Any) -> Any:
    """A pydantic JSON schema (2020-12) in OpenAPI 3.0's dialect: `{"type": "null"}` in an anyOf becomes
    `nullable`, `const` a one-value enum, a numeric exclusive bound a bound with the flag, `examples` one
    `example`, a tuple's `prefixItems` its items; refs point into the components."""
    if isinstance(schema, list):
        return [openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: openapi_30(value) for key, value in schema.items() if key not in ("$defs", "examples", "prefixItems")}
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/$defs/", "#/components/schemas/")
        if len(out) > 1:  # OpenAPI 3.0 ignores what stands beside a $ref: wrap it
            out = {**{k: v for k, v in out.items() if k != "$ref"}, "allOf": [{"$ref": out["$ref"]}]}
    for key in ("anyOf", "oneOf"):
        options = out.get(key)
        if options and any(option == {"type": "null"} for option in options):
            rest = [option for option in options if option != {"type": "null"}]
            out.pop(key)
            out["nullable"] = True
            if len(rest) == 1 and "$ref" not in rest[0]:
                out = {**rest[0], **out}
            elif rest:
                out["allOf" if len(rest) == 1 else key] = rest
    if "const" in out:
        out["enum"] = [out.pop("const")]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(bound), int | float) and not isinstance(out[bound], bool):
            out[flag] = out.pop(bound)
            out[bound] = True
    if "examples" in schema and schema["examples"]:
        out["example"] = openapi_30(schema["examples"][0])
    if "prefixItems" in schema:
        items = openapi_30(schema["prefixItems"])
        out["items"] = items[0] if len(items) == 1 else {"anyOf": items}
    if isinstance(out.get("properties"), dict):
        # drf-spectacular names each property's enum after the property ("FormatEnum") across the whole
        # schema; the settings' choices stay where they are, under allOf, so that no two collide.
        out["properties"] = {name: _enum_kept(prop) for name, prop in out["properties"].items()}
    return out


def _enum_kept(prop: Any) -> Any:
    if not isinstance(prop, dict) or "enum" not in prop:
        return prop
    choice = {k: prop[k] for k in ("type", "enum") if k in prop}
    return {**{k: v for k, v in prop.items() if k not in choice}, "allOf": [choice]}


def partial_run_spec() -> dict[str, Any]:
    """RunSpec's JSON schema as settings merged into others (an experiment's config, a launch's or a clone's
    overrides): any of its sections, each with any of its settings; no unknown section or setting."""
    schema = settings_schema(RunSpec)
    schema.pop("required", None)
    for prop in schema["properties"].values():
        # A section always there (model, optim...) is merged key by key, so none of its keys is required
        # here; an optional one (null by default: warm_up, environment) may be new, and needs its own.
        ref = prop.get("$ref", "").removeprefix("#/$defs/")
        if ref in schema["$defs"]:
            schema["$defs"][f"{ref}Overrides"] = {k: v for k, v in schema["$defs"][ref].items() if k != "required"}
            prop["$ref"] = f"#/$defs/{ref}Overrides"
    # Settings typed as free strings that the trainer checks against a catalog (as the experiment form shows).
    for dotted, choices in CATALOG_CHOICES.items():
        section, name = dotted.split(".")
        ref = next(o["$ref"] for o in [schema["properties"][section], *schema["properties"][section].get("anyOf", [])]
                   if "$ref" in o)  # fmt: skip
        setting = schema["$defs"][ref.removeprefix("#/$defs/")]["properties"][name]
        for option in [setting, *setting.get("anyOf", [])]:
            if option.get("type") == "string":
                option["enum"] = choices
    return schema


def with_kinds(item: dict[str, Any], kinds: Mapping[str, type[BaseModel]], defs: dict[str, Any]) -> dict[str, Any]:
    """An object schema with `kind` and `params` (a criterion, an environment) as one choice per kind, each
    with its own params model's schema: the kinds the server knows, and the params each takes. The params
    models' sub-schemas join `defs`."""
    variants = []
    for kind, params_model in kinds.items():
        params = params_model.model_json_schema(mode="validation")
        defs.update(params.pop("$defs", {}))
        properties = {**item["properties"], "kind": {"type": "string", "enum": [kind]}, "params": params}
        # Left out, params are {}: a kind whose params require a setting requires params too.
        required = [*item.get("required", []), *(["params"] if params.get("required") else [])]
        variants.append({**item, "properties": properties, "required": sorted(set(required)),
                         "title": f"{item.get('title', '')} {kind}".strip()})  # fmt: skip
    return {"oneOf": variants, "description": item.get("description", "")}


def _criterion(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    schema["properties"]["name"]["pattern"] = CRITERION_NAME
    return with_kinds(schema, CRITERION_KINDS, defs)


def _rubric(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    schema["properties"]["criteria"]["minItems"] = 1  # RubricSpec._some_criterion
    return schema


def _environment(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    return with_kinds(schema, {kind: entry.params_model for kind, entry in ENVIRONMENT_KINDS.items()}, defs)


def _tool(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    return with_kinds(schema, dict(TOOL_KINDS.items()), defs)


def _procedural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    schema["properties"]["task"]["enum"] = list(TASKS.names())  # ProceduralSpec._known_task
    return schema


CRITERION_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"  # CriterionSpec._identifier's rule
# What the trainer schema's validators check beyond what pydantic's JSON schema shows, by model: the kinds
# and each kind's params (checked in a model validator), a criterion's name, a rubric's first criterion,
# a procedural task's name.
REFINED = {
    "CriterionSpec": _criterion,
    "RubricSpec": _rubric,
    "EnvironmentSpec": _environment,
    "ToolChoice": _tool,
    "ProceduralSpec": _procedural,
}


def settings_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema (2020-12), refined by REFINED wherever one of those models appears in it."""
    schema = model.model_json_schema(mode="validation")
    defs = schema.pop("$defs", {})
    if model.__name__ in REFINED:
        schema = REFINED[model.__name__](schema, defs)
    refined = set()
    while todo := [name for name in defs if name in REFINED and name not in refined]:
        for name in todo:  # a kind's params bring their own sub-models (a tools environment's ToolChoice)
            defs[name] = REFINED[name](defs[name], defs)
            refined.add(name)
    return {**schema, "$defs": defs}


class StudioAutoSchema(AutoSchema):
    def _get_parameters(self):
        parameters = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            # Every whole number the views read (`params.number_param`, `as_id`) is refused past 64 bits.
            if parameter.get("in") == "query" and schema.get("type") == "integer":
                schema.setdefault("minimum", MIN_INT)
                schema.setdefault("maximum", MAX_ID)
        return parameters

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        model = getattr(field.parent, "json_schemas", {}).get(field.field_name) if field.parent else None
        if direction == "request" and model is not None:
            return self._pydantic_schema(field, model)
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request"
            and isinstance(schema, dict)
            and schema.get("type") == "string"
            and "pattern" not in schema
            and any(isinstance(v, ProhibitNullCharactersValidator) for v in getattr(field, "validators", ()))
        ):
            blank_refused = not field.allow_blank and getattr(field, "trim_whitespace", False)
            schema["pattern"] = NOT_BLANK if blank_refused else NO_NUL
        return schema

    def _pydantic_schema(self, field, model: type[BaseModel] | Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """`model`'s JSON schema (or the one `model()` builds) for the field, its $defs as components."""
        raw = settings_schema(model) if isinstance(model, type) else model()
        for name, sub in raw.get("$defs", {}).items():
            self.registry.register_on_missing(
                ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=openapi_30(sub))
            )
        schema = openapi_30(raw)
        schema.pop("title", None)
        if field.help_text:
            schema["description"] = str(field.help_text)
        if getattr(field, "allow_null", False):
            schema["nullable"] = True
        return schema

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in self._errors().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses

    def _errors(self) -> dict[str, OpenApiResponse]:
        # A view's own: {action or lower-case method: {code: response}} in `error_responses`.
        own = getattr(self.view, "error_responses", {})
        out = {} if self.path in NO_403 else {"403": ERROR_403}
        out.update(own.get(getattr(self.view, "action", None) or self.method.lower(), {}))
        if "{" in self.path:
            out["404"] = ERROR_404
        takes_body = self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        if takes_body or any(p.get("in") == "query" for p in self._get_parameters()):
            out["400"] = FIELD_ERRORS
        return dict(sorted(out.items()))
