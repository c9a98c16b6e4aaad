"""functions: tools written by the user as Python functions (one source, several functions).

Each function's signature and docstring become its schema: the docstring's first paragraph is
the description, its "Args:" (Google style) or "Parameters" (numpy style) section gives each
parameter's description, the annotations give the JSON types, and parameters without a default
are required. All of this is read from the parsed source (`ast`): the studio's process never
runs user code. The functions run in the sandbox, one worker per episode (module-level state
lasts the episode), under the episode's time and memory limits.

What comes back is checked (the dispatcher runs next to the user's code, which may rebind what
it uses): `[text, count]`, text cut to the observation limit; anything else ends that call with
the reason, and the next call goes on.
"""

from __future__ import annotations

import functools
from typing import Any

from trainers.rollout.environments.catalog import FunctionsParams
from trainers.rollout.environments.signatures import parse_source, schema_of, top_level_functions
from trainers.rollout.environments.tools.base import TOOLS, Clipped, Tool, ToolError, check_arguments
from trainers.rollout.environments.tools.sandboxed import EpisodeSandbox, MalformedValue, reply_count, reply_text

DISPATCH = "__rollout_call__"
# Appended to the user's source (after it, so its line numbers stay the user's own): calls the
# named function and turns its value into text, kept to `limit` characters plus a count.
DISPATCHER = f"""

def {DISPATCH}(name, arguments, limit):
    import json as _json
    value = globals()[name](**arguments)
    if not isinstance(value, str):
        try:
            value = _json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            value = repr(value)
    return [value[:limit], max(len(value) - limit, 0)]
"""


@TOOLS.register("functions")
class Functions(Tool):
    params_model = FunctionsParams
    params: FunctionsParams
    _sandbox: EpisodeSandbox | None = None

    @functools.cached_property
    def _schemas(self) -> dict[str, dict[str, Any]]:
        defined = top_level_functions(parse_source(self.params.code))
        return {name: schema_of(defined[name]) for name in self.params.chosen(defined)}

    def schemas(self) -> list[dict[str, Any]]:
        return list(self._schemas.values())

    def call(self, name: str, arguments: dict[str, Any]) -> Clipped:
        check_arguments(self._schemas[name]["function"]["parameters"], arguments)
        if self._sandbox is None:
            source = self.params.code + DISPATCHER
            self._sandbox = EpisodeSandbox(source, DISPATCH, self.limits, filename="<tools>")
        outcome = self._sandbox.call(name, arguments, self.limits.max_observation_chars)
        if not outcome.ok:
            raise ToolError(outcome.error)
        value, limit = outcome.value, self.limits.max_observation_chars
        try:
            if type(value) is not list or len(value) != 2:
                raise MalformedValue(f"a {type(value).__name__}, not [text, count]")
            text = reply_text(value[0], limit, "the result")
            more = reply_count(value[1], "the count of dropped characters") + max(len(value[0]) - limit, 0)
        except MalformedValue as exc:
            raise ToolError(f"{name}() gave back a malformed result: {exc}") from None
        return Clipped(text, more)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
