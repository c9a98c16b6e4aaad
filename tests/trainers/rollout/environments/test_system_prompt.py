"""The system prompt a tools environment starts from names the tools and the answer format, and the
tools' own schemas hold no example a model can copy as a call's value (issue 39)."""

import re

import pytest

from trainers.demos import real_agent
from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.catalog import TOOL_KINDS
from trainers.rollout.environments.system_prompt import DEFAULT, suggested_system_prompt
from trainers.rollout.environments.tools import TOOLS, ToolError
from trainers.rollout.environments.tools.calculator import EXPRESSION_HELP

SHOUT = 'def shout(text: str) -> str:\n    """Say it loud.\n\n    Args:\n        text: what\n    """\n    return text\n'


def test_the_calculator_gets_the_demos_instruction():
    # The agent demo's prompt is this suggestion, in the words its runs were measured with.
    expected = "You are a helpful assistant. Use the calculator for arithmetic, then answer with the number only."
    assert suggested_system_prompt([{"kind": "calculator"}]) == expected == real_agent.SYSTEM_PROMPT


def test_it_names_every_tool_and_the_answer_tag():
    text = suggested_system_prompt(
        [{"kind": "calculator"}, {"kind": "python"}, {"kind": "functions", "params": {"code": SHOUT}}],
        answer="answer_tag",
        answer_tag="final",
    )
    assert "the calculator" in text and "python" in text and "the function shout" in text
    assert text.endswith("inside <final></final>.")


def test_entries_that_are_no_tool_leave_the_default():
    assert suggested_system_prompt([{"kind": "nope"}, {"kind": "functions", "params": {"code": "x = ("}}]) == DEFAULT
    assert suggested_system_prompt([]) == DEFAULT


@pytest.mark.parametrize(
    "kind", [k for k in TOOLS.names() if not TOOL_KINDS.get(k).model_json_schema().get("required")]
)
def test_tool_schemas_hold_no_number_to_copy(kind):
    # A number in an argument's description is what the real model copied into its calls.
    tool = TOOLS.get(kind).create({}, EpisodeLimits())
    try:
        for schema in tool.schemas():
            for name, prop in schema["function"]["parameters"]["properties"].items():
                assert not re.search(r"\d", prop.get("description", "")), (kind, name, prop)
                assert "examples" not in prop and "example" not in prop, (kind, name)
    finally:
        tool.close()


def test_a_copied_calculator_example_is_refused_with_what_it_holds():
    copied = EXPRESSION_HELP.rsplit(": ", 1)[1]
    with pytest.raises(ToolError, match="the name 'A'"):
        TOOLS.get("calculator").create({}, EpisodeLimits()).call("calculator", {"expression": copied})
