"""The environment kinds and tool kinds as settings: each kind's description and parameter model,
the schema the studio renders and validates and `EnvironmentSpec` checks a config against.

Imports no runtime code (no sandbox, no tool, no torch): user code in a `functions` tool or a
`python` environment is parsed here, never run. Each kind's code lives in `kinds/` and `tools/`
and takes its `params_model` from here; `tests/trainers/rollout/environments/test_catalog.py`
checks that both list the same names with the same models.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trainers.access import DATA, marks
from trainers.data.procedural.multi_turn import DOORS_HARDEST, GUESS_HARDEST, LOOKUP_HARDEST
from trainers.registry import Registry
from trainers.rollout.environments.signatures import parse_source, schema_of, top_level_functions

# ------------------------------------------------------------------ tool kinds


class ToolParams(BaseModel):
    """Settings of a tool kind; `offers` names the one function a kind with no choices offers."""

    model_config = ConfigDict(extra="forbid")

    offers: ClassVar[str] = ""
    # How the suggested system prompt tells the model to use the tool ("the calculator for arithmetic"),
    # and the answer it then asks for when this tool decides it ("the number only"; "" for no opinion):
    # see trainers.rollout.environments.system_prompt.
    use: ClassVar[str] = ""
    answer_shape: ClassVar[str] = ""

    def prompt_use(self) -> str:
        return self.use or f"the {self.offers} tool"

    def function_names(self) -> list[str]:
        """The names of the functions this configuration offers, known without running anything
        (the tools kind refuses two tools offering the same name when it is saved)."""
        return [self.offers]


class CalculatorParams(ToolParams):
    """Arithmetic on numbers, constants and math functions, evaluated with bounds (no code runs)."""

    offers = "calculator"
    use = "the calculator for arithmetic"
    answer_shape = "the number only"


class PythonToolParams(ToolParams):
    """A stateful Python interpreter in the sandbox, variables kept across one episode's calls."""

    offers = "python"
    use = "python to run code for anything that needs computing"


class SearchParams(ToolParams):
    """BM25 search over a document collection (a dataset file: JSON Lines, CSV, Parquet...)."""

    offers = "search"
    use = "search to look facts up in the documents"

    dataset: str = Field(
        ...,
        description="Path of the document collection: a file or folder under the folders data may be read from.",
        examples=["docs.jsonl"],
        json_schema_extra=marks(DATA),
    )
    format: str = Field("auto", description="Dataset format, as for training data.")
    text_field: str = Field("text", description="Field holding each document's text.")
    title_field: str = Field("title", description="Field holding its title ('' for none).")
    top_k: int = Field(3, ge=1, le=50, description="Documents returned per query.")
    max_doc_chars: int = Field(600, ge=20, le=100_000, description="Each document's text is cut to this length.")


FUNCTION_EXAMPLE = '''def shout(text: str) -> str:
    """Say the text in capitals.

    Args:
        text: what to say
    """
    return text.upper()
'''


class FunctionsParams(ToolParams):
    """Python functions you write, offered to the model as tools (run in the sandbox)."""

    code: str = Field(
        ...,
        description="Python source defining the functions, each with type hints and a docstring (its Args: "
        "section describes the arguments): the model sees them as the tools' JSON schemas.",
        examples=[FUNCTION_EXAMPLE],
    )
    functions: list[str] = Field(
        default_factory=list,
        description="Which top-level functions are tools; empty: every one whose name does not start with _.",
    )

    @field_validator("code")
    @classmethod
    def _parses(cls, code: str) -> str:
        parse_source(code)
        return code

    @model_validator(mode="after")
    def _functions_have_schemas(self) -> FunctionsParams:
        """Parse (never run) the source: each tool function must exist and have a docstring."""
        defined = top_level_functions(parse_source(self.code))
        for name in self.functions:
            if name not in defined:
                raise ValueError(f"the code defines no top-level function {name}()")
        for name in self.chosen(defined):
            schema_of(defined[name])
        if not self.chosen(defined):
            raise ValueError("the code defines no tool function (a top-level def whose name does not start with _)")
        return self

    def chosen(self, defined: dict[str, ast.FunctionDef]) -> list[str]:
        return self.functions or [name for name in defined if not name.startswith("_")]

    def function_names(self) -> list[str]:
        return self.chosen(top_level_functions(parse_source(self.code)))

    def prompt_use(self) -> str:
        names = self.function_names()
        return f"the function{'s' if len(names) > 1 else ''} {', '.join(names)}"


# Tool kind -> its parameters model, in the order the studio lists them.
TOOL_KINDS: Registry[type[ToolParams]] = Registry("tool kind")
for _kind, _model in (
    ("calculator", CalculatorParams),
    ("functions", FunctionsParams),
    ("python", PythonToolParams),
    ("search", SearchParams),
):
    TOOL_KINDS.register(_kind)(_model)


def tool_example(kind: str) -> dict[str, Any]:
    """One entry of a tools list for `kind`: {"kind": ...} with its required settings, each the first
    example its field declares (the shape the studio shows as an example)."""
    schema = TOOL_KINDS.get(kind).model_json_schema()
    params = {name: (schema["properties"][name].get("examples") or ["..."])[0] for name in schema.get("required", [])}
    return {"kind": kind, "params": params} if params else {"kind": kind}


def tools_example() -> list[dict[str, Any]]:
    """A tools list with one entry of each registered tool kind."""
    return [tool_example(kind) for kind in TOOL_KINDS.names()]


# ------------------------------------------------------------------ environment kinds


TOOLS_PLACEHOLDER = "{tools}"


# Qwen2.5/Qwen3's chat template text for tools (tokenizer_config.json), with the schemas at {tools}.
QWEN_TOOLS_PROMPT = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>"""


class ToolChoice(BaseModel):
    """One tool kind and its settings."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(..., description="Tool kind: " + ", ".join(TOOL_KINDS.names()) + ".")
    params: dict[str, Any] = Field(default_factory=dict, description="The tool kind's settings.")

    @model_validator(mode="after")
    def _params_match_kind(self) -> ToolChoice:
        model = TOOL_KINDS.get(self.kind)  # UnknownNameError (a ValueError) lists the kinds
        self.__dict__["params"] = model.model_validate(self.params).model_dump()
        return self

    def function_names(self) -> list[str]:
        return TOOL_KINDS.get(self.kind).model_validate(self.params).function_names()

    def params_section(self) -> ToolParams:
        """The params as the kind's model (trainers.access finds the paths they name)."""
        return TOOL_KINDS.get(self.kind).model_validate(self.params)


class ToolsParams(BaseModel):
    """Tools the model may call, how it writes a call, and what counts as its answer."""

    model_config = ConfigDict(extra="forbid")

    tools: list[ToolChoice] = Field(
        ...,
        min_length=1,
        description='The tools offered: a list of {"kind": a tool kind, "params": its settings}.',
        examples=[tools_example()],
    )
    formats: list[Literal["hermes", "python"]] = Field(
        ["hermes"],
        min_length=1,
        description="How calls are written: hermes <tool_call>{json}</tool_call>, python ```python blocks.",
    )
    system_prompt: str = Field("You are a helpful assistant.", description="Used when the row has no system message.")
    tools_prompt: str = Field(
        QWEN_TOOLS_PROMPT, description="Appended to the system message; {tools} is replaced by the JSON schemas."
    )
    answer: Literal["no_tool_call", "answer_tag"] = Field(
        "no_tool_call",
        description="no_tool_call: a turn without a tool call is the answer. answer_tag: it must also hold <answer>...</answer>.",
    )
    answer_tag: str = Field("answer", pattern=r"^[A-Za-z_][\w-]*$", description="Tag name for answer=answer_tag.")

    @field_validator("tools_prompt")
    @classmethod
    def _lists_the_tools(cls, text: str) -> str:
        if TOOLS_PLACEHOLDER not in text:
            raise ValueError(f"the tools prompt must contain {TOOLS_PLACEHOLDER}, where the tool schemas go")
        return text

    @model_validator(mode="after")
    def _names_are_unique(self) -> ToolsParams:
        names = [name for choice in self.tools for name in choice.function_names()]
        taken = sorted({n for n in names if names.count(n) > 1})
        if taken:
            raise ValueError(f"two tools offer a function named {taken[0]!r}")
        if "python" in self.formats and "python" not in names:
            raise ValueError("the python call format runs the python tool: add it to the tools")
        return self


# What reset(row) and step(text) of a `python` environment receive and return: see
# kinds/python_env.py (the dispatcher) and generate.py (the row: the prompt's fields and its messages).
PYTHON_ENV_CONTRACT = (
    "Python source defining the class. One object per episode: Env(**options). "
    'reset(row) receives the prompt\'s row, a dict: row["messages"] is the prompt as chat messages '
    '[{"role": ..., "content": ...}] (a text prompt is one user message), and the row\'s answer and extra '
    'fields are under their names (row["answer"]). It returns the first messages: a str (one user message), '
    'a list of messages, or a dict {"messages": ..., "fields": {...} (added to the fields the rubric reads), '
    '"state": ...}. step(text) receives the model\'s turn as text and returns (observation, reward, done) or '
    'a dict with "observation", "reward", "done" and optionally "state" and "answered"; an observation is a str '
    "(one message in observation_role), a list of messages, or None. An exception ends the episode."
)
PYTHON_ENV_EXAMPLE = """class Env:
    def __init__(self, target=7):
        self.target = target

    def reset(self, row):
        # row["messages"]: the prompt as chat messages; row["answer"] etc.: the row's fields
        return row["messages"]

    def step(self, text):
        guess = text.strip()
        if guess == str(self.target):
            return "correct", 1.0, True
        return "try again", 0.0, False
"""


class PythonEnvParams(BaseModel):
    """An environment you write in Python: a class with reset(row) and step(text), run in the sandbox."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(..., description=PYTHON_ENV_CONTRACT, examples=[PYTHON_ENV_EXAMPLE])
    class_name: str = Field("Env", description="The class to instantiate, once per episode.")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for the class.", examples=[{"target": 7}]
    )
    observation_role: Literal["user", "tool"] = Field("user", description="Role of an observation given as text.")

    @model_validator(mode="after")
    def _defines_the_class(self) -> PythonEnvParams:
        """Parse (never run) the code: the class must exist with reset and step methods."""
        tree = parse_source(self.code)
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == self.class_name]
        if not found:
            raise ValueError(f"the code defines no top-level class {self.class_name}")
        methods = {n.name for n in found[-1].body if isinstance(n, ast.FunctionDef)}
        missing = [m for m in ("reset", "step") if m not in methods]
        if missing:
            raise ValueError(f"class {self.class_name} has no method {' or '.join(missing)}()")
        return self


class _ProceduralParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LookupParams(_ProceduralParams):
    difficulty: int = Field(
        1, ge=1, le=LOOKUP_HARDEST, description="Boxes to open, one leading to the next, before the code."
    )
    code_digits: int = Field(4, ge=1, le=12, description="Digits of the code (a guess is right 1 time in 10^digits).")
    progress_reward: float = Field(
        0.0, ge=0, le=1, description="Turn reward for opening a box of the chain for the first time."
    )
    instructions: bool = Field(True, description="Start with a system message describing the tool and its format.")


class GuessNumberParams(_ProceduralParams):
    difficulty: int = Field(
        1, ge=1, le=GUESS_HARDEST, description="The number lies in 1..10 * 2^(difficulty-1) (10, 20, 40, ... 5120)."
    )
    closeness_reward: float = Field(
        0.0, ge=0, le=1, description="Turn reward scale for a guess's closeness: scale * (1 - distance / range)."
    )


class DoorsParams(_ProceduralParams):
    difficulty: int = Field(
        1, ge=1, le=DOORS_HARDEST, description="Doors besides the right one (difficulty + 1 doors to choose from)."
    )
    code_digits: int = Field(2, ge=1, le=12, description="Digits of the code behind each door.")
    progress_reward: float = Field(0.0, ge=0, le=1, description="Turn reward for opening the right door.")
    instructions: bool = Field(True, description="Start with a system message describing the task.")


VERIFIERS_VERSION = "0.4.0"  # the verifiers release a package is installed with (its own virtual environment)
PACKAGE_NAME = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$"  # a distribution name (PEP 508)
PACKAGE_VERSION = r"^[0-9][0-9A-Za-z.+!_-]{0,63}$"  # one exact release, never a range


class VerifiersParams(BaseModel):
    """A verifiers 0.4 taskset package (as the Environments Hub publishes them), pinned, installed into a
    virtual environment of its own by the worker; its tasks are the prompts and its rewards the criteria,
    all of its code run in the sandbox."""

    model_config = ConfigDict(extra="forbid")

    package: str = Field(..., pattern=PACKAGE_NAME, description="The package's name on the package index.",
                         examples=["reverse-text"])  # fmt: skip
    version: str = Field(
        ..., pattern=PACKAGE_VERSION, description="Its exact version (pinned: recorded in the run's provenance).",
        examples=["0.1.0"],
    )  # fmt: skip
    taskset: str = Field(
        "", pattern=r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)?$",
        description="The module exporting the Taskset (its __all__); empty: the package's name with - as _.",
    )  # fmt: skip
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="The taskset's config fields (verifiers 0.4's arguments to the taskset, as load_environment's "
        "keyword arguments were before).",
        examples=[{"rows": 100}],
    )
    max_rows: int = Field(1000, ge=1, le=100_000, description="Tasks read from the taskset as the run's prompts.")
    memory_mb: int = Field(
        2048, ge=256, le=65536, description="Memory limit of the environment's sandbox (verifiers imports a lot)."
    )
    load_timeout_s: float = Field(
        180, gt=0, le=1800, description="Wall-clock limit of importing the package and reading its tasks."
    )
    score_timeout_s: float = Field(60, gt=0, le=1800, description="Wall-clock limit of scoring one batch.")

    @field_validator("package")
    @classmethod
    def _not_verifiers_itself(cls, name: str) -> str:
        if name.lower().replace("_", "-") in ("verifiers", "openenv-core"):
            raise ValueError("name the environment's package: verifiers itself comes with it")
        return name

    def module(self) -> str:
        return self.taskset or self.package.replace("-", "_").replace(".", "_").lower()


@dataclass(frozen=True)
class EnvironmentKind:
    description: str  # what the studio shows beside the kind
    params_model: type[BaseModel]


# Environment kind -> description and parameters model, in the order the studio lists them.
ENVIRONMENT_KINDS: Registry[EnvironmentKind] = Registry("environment kind")
for _kind, _entry in (
    ("lookup", EnvironmentKind(
        "The prompt names a box; the code is behind `difficulty` boxes. A turn without a tool call is\n"
        'the answer and ends the episode; the rubric compares it with `fields["answer"]` (the code).',
        LookupParams)),
    ("guess_number", EnvironmentKind(
        'Each turn\'s last integer is the guess; the reply is "higher", "lower" or "correct" (done).\n'
        "The state is the interval still consistent with the replies and, after a turn, the reply the\n"
        "next turn sees, so GiGPO groups episodes that know the same thing and were told the same.",
        GuessNumberParams)),
    ("doors", EnvironmentKind(
        "The first turn opens a door (it names a door's colour); every room shows a code, but only the\n"
        "room behind the door the prompt's lamp names shows the real one, so the first turn decides\n"
        'the outcome. The next turn is the answer; the rubric compares it with `fields["answer"]`.',
        DoorsParams)),
    ("python", EnvironmentKind(PythonEnvParams.__doc__, PythonEnvParams)),
    ("tools", EnvironmentKind(ToolsParams.__doc__, ToolsParams)),
    ("verifiers", EnvironmentKind(VerifiersParams.__doc__, VerifiersParams)),
):  # fmt: skip
    ENVIRONMENT_KINDS.register(_kind)(_entry)


def environment_params(kind: str) -> type[BaseModel]:
    """The parameters model of an environment kind; `UnknownNameError` (a ValueError) listing the kinds."""
    return ENVIRONMENT_KINDS.get(kind).params_model
