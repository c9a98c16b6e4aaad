"""The library's layout holds: no import circle inside `trainers/` (counting imports inside
functions and under TYPE_CHECKING, and the package `__init__` modules an import runs), imports
inside functions only where they defer something heavy and say so, and a settings package that
loads no runtime code; modules and classes small unless a module says why, and few modules at the
top of the package."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests import import_graph as walk
from tests.import_graph import ROOT, circle

MODULES = walk.package_modules("trainers")


def imports(module: str):
    return walk.imports(MODULES, module)


def import_graph() -> dict[str, set[str]]:
    return walk.import_graph(MODULES)


def test_the_walk_finds_the_edges_it_must():
    # Guards the walk itself: a function-level import and a from-package import are both seen.
    graph = import_graph()
    assert "trainers.run.checkpoint" in graph["trainers.run.loop"]
    assert "trainers.run.loop" in graph["trainers.cli"]  # imported inside cmd_run
    assert "trainers.rollout.environments.kinds.tools" in graph["trainers.rollout.environments.kinds"]
    # importing rollout.environments.kinds.procedural runs the kinds package's __init__ first
    assert "trainers.rollout.environments.kinds" in graph["trainers.demos.agent_demo"]


def test_a_circle_is_found_when_there_is_one():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert circle({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_trainers():
    assert circle(import_graph()) == []


def test_imports_inside_functions_defer_something_heavy_and_say_so():
    unexplained = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, node, inside in imports(module):
            if not inside:
                continue
            said = "#" in lines[node.end_lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
            if not said:
                unexplained.append(f"{module}:{node.lineno} imports {target}")
    assert unexplained == []


def loaded_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


RUNTIME = (
    "torch", "transformers", "vllm", "numpy", "django",
    "trainers.rollout.engines", "trainers.rollout.environments.kinds", "trainers.rollout.environments.tools",
    "trainers.sandbox", "trainers.run", "trainers.update", "trainers.models.loading", "trainers.scale.distributed",
)  # fmt: skip


@pytest.mark.parametrize(
    "statement",
    [
        "import trainers.spec",
        "from trainers.spec import RunSpec; RunSpec.model_json_schema()",
        "from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS, TOOL_KINDS",
    ],
)
def test_the_settings_load_no_runtime_code(statement):
    loaded = loaded_after(statement)
    runtime = [m for m in loaded if any(m == r or m.startswith(r + ".") for r in RUNTIME)]
    assert runtime == []
    assert any(m.startswith("trainers.") for m in loaded)  # the check ran against the real package


LONG_REASON = "Why this module is long:"  # in a module's docstring: the reason it is over the bounds below
MAX_MODULE_LINES, MAX_CLASS_LINES, MAX_TOP_LEVEL_MODULES = 600, 400, 8


def test_modules_and_classes_stay_small_unless_their_module_says_why():
    too_long = []
    for module, path in MODULES.items():
        text = path.read_text()
        if LONG_REASON in (ast.get_docstring(ast.parse(text)) or ""):
            continue
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{module}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                too_long.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []


def test_the_top_of_trainers_holds_only_what_every_stage_uses():
    top = sorted(p.name for p in (ROOT / "trainers").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
