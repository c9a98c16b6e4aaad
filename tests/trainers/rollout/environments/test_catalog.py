"""The torch-free catalogue and the runtime registries list the same environment and tool kinds,
each with the same parameters model, and a tool's function names read from its settings are the
names its schemas offer."""

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from trainers.rollout.environments.base import Environment, EpisodeLimits
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, TOOL_KINDS
from trainers.rollout.environments.kinds import ENVIRONMENTS
from trainers.rollout.environments.tools import TOOLS

ROOT = Path(__file__).resolve().parents[4]
BUILT_IN = ["lookup", "guess_number", "doors", "python", "tools", "verifiers"]
FUNCTIONS = 'def add(a: int, b: int) -> int:\n    """Add.\n\n    Args:\n        a: one\n        b: two\n    """\n    return a + b\n'
SETTINGS = {"calculator": {}, "python": {}, "functions": {"code": FUNCTIONS}, "search": {"dataset": "docs.jsonl"}}


def test_every_built_in_environment_kind_is_in_the_catalogue_with_its_params_model():
    # Tests register kinds of their own (they enter the catalogue too); the built-in ones come first.
    assert ENVIRONMENT_KINDS.names()[: len(BUILT_IN)] == BUILT_IN
    assert ENVIRONMENTS.names()[: len(BUILT_IN)] == BUILT_IN
    for kind in ENVIRONMENTS.names():
        assert ENVIRONMENTS.get(kind).params_model is ENVIRONMENT_KINDS.get(kind).params_model


def test_every_tool_kind_is_in_the_catalogue_and_offers_the_functions_its_settings_name():
    assert TOOLS.names() == TOOL_KINDS.names()
    for kind in TOOLS.names():
        tool_class = TOOLS.get(kind)
        assert tool_class.params_model is TOOL_KINDS.get(kind)
        params = tool_class.params_model.model_validate(SETTINGS[kind])
        tool = tool_class(params, EpisodeLimits())
        try:
            assert [s["function"]["name"] for s in tool.schemas()] == params.function_names()
        finally:
            tool.close()


def test_a_kind_registered_outside_the_catalogue_enters_it_and_a_built_in_name_cannot_change_its_model():
    class Params(BaseModel):
        pass

    class Plugin(Environment):
        """A plugin's environment."""

        params_model = Params

    ENVIRONMENTS.register("test-catalogue-plugin")(Plugin)
    assert ENVIRONMENT_KINDS.get("test-catalogue-plugin").params_model is Params
    assert ENVIRONMENT_KINDS.get("test-catalogue-plugin").description == "A plugin's environment."
    with pytest.raises(ValueError, match="not the catalogue's"):
        ENVIRONMENTS.register("lookup")(Plugin)


def test_the_run_path_alone_registers_the_built_in_kinds():
    # A worker imports the loop, never the kinds package by name: the kinds must still be there.
    code = "from trainers.run.loop import train; from trainers.rollout.environments.base import ENVIRONMENTS; print(ENVIRONMENTS.names())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == repr(BUILT_IN)
