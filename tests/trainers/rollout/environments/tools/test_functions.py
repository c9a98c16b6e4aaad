"""User tools: the schema comes from the signature and docstring (parsed, never run here); the
functions run in one sandbox worker per episode."""

import pytest
from pydantic import ValidationError

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.signatures import parse_docstring
from trainers.rollout.environments.tools import TOOLS, ToolError

CODE = '''
COUNT = [0]

def weather(city: str, days: int = 1, metric: bool = True) -> str:
    """Forecast for a city.

    Several days at once if asked.

    Args:
        city (str): Name of the city,
            in English.
        days: How many days ahead.
    """
    COUNT[0] += 1
    return f"{city}: sunny for {days} day(s), call {COUNT[0]}"


def lookup(keys: list[str], table: dict) -> dict:
    """Look keys up in a table.

    Parameters
    ----------
    keys : list of str
        The keys.
    table : dict
        Where to look.
    """
    return {k: table.get(k) for k in keys}


def _helper():
    return 1
'''


def make(**params):
    return TOOLS.get("functions").create({"code": CODE, **params}, EpisodeLimits(tool_timeout_s=2, tool_memory_mb=256))


def test_each_public_function_becomes_a_schema_from_its_docstring():
    weather, lookup = make().schemas()
    assert weather == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "Name of the city, in English."},
                    "days": {"type": "integer", "description": "How many days ahead."},
                    "metric": {"type": "boolean"},
                },
                "required": ["city"],
            },
        },
    }
    assert lookup["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "keys": {"type": "array", "description": "The keys."},
            "table": {"type": "object", "description": "Where to look."},
        },
        "required": ["keys", "table"],
    }


def test_a_docstring_without_sections_is_all_description():
    assert parse_docstring("Add two numbers.\n\nReturns their sum.") == ("Add two numbers.", {})


def test_only_the_named_functions_are_offered():
    assert [s["function"]["name"] for s in make(functions=["lookup"]).schemas()] == ["lookup"]


def test_functions_run_in_one_sandbox_worker_per_episode():
    tool = make()
    try:
        assert tool.call("weather", {"city": "Oslo"}).text == "Oslo: sunny for 1 day(s), call 1"
        assert tool.call("weather", {"city": "Oslo", "days": 2}).text == "Oslo: sunny for 2 day(s), call 2"
        assert tool.call("lookup", {"keys": ["a", "b"], "table": {"a": 1}}).text == '{"a": 1, "b": null}'
        with pytest.raises(ToolError, match="argument 'days' must be integer"):
            tool.call("weather", {"city": "Oslo", "days": "two"})
    finally:
        tool.close()
    fresh = make()
    try:
        assert fresh.call("weather", {"city": "Rome"}).text.endswith("call 1")  # a new episode, a new worker
    finally:
        fresh.close()


@pytest.mark.parametrize(
    ("code", "functions", "error"),
    [
        ("def f(x):\n    return x\n", [], "function f() has no docstring"),
        ("def f(x:\n", [], "syntax error at line 1"),
        ('def f(*args):\n    """Doc."""\n', [], "use named parameters only"),
        ('def f(x):\n    """Doc."""\n', ["g"], "defines no top-level function g()"),
        ("X = 1\n", [], "defines no tool function"),
        ("import os\nos.system('touch /tmp/never-run-by-validation')\ndef f(x):\n    return x\n", [], "no docstring"),
    ],
)
def test_bad_sources_are_refused_when_saved_without_running_them(code, functions, error, tmp_path):
    with pytest.raises(ValidationError, match=error.replace("(", r"\(").replace(")", r"\)")):
        TOOLS.get("functions").params_model.model_validate({"code": code, "functions": functions})
