"""The library's layout holds: no import circle inside `trainers/` (counting imports inside
functions and under TYPE_CHECKING, and the package `__init__` modules an import runs), imports
inside functions only where they defer something heavy and say so, and a settings package that
loads no runtime code."""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trainers"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(target: str) -> str | None:
    """The module an imported dotted name lives in (a name imported from a module is not a module)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports(module: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported trainers module, statement, inside a function) for every import in `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    in_function = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(fn)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{alias.name}" for alias in node.names] or [prefix]
        else:
            continue
        for name in names:
            target = resolve(name)
            if target and target != module:
                found.append((target, node, id(node) in in_function))
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module in MODULES:
        own_packages = {module.rsplit(".", i)[0] for i in range(module.count(".") + 1)}
        for target, _, _ in imports(module):
            graph[module].add(target)
            # Importing a.b.c runs a/__init__ and a/b/__init__ first: those are edges too, unless
            # they are packages the importer is already inside.
            parts = target.split(".")
            for i in range(2, len(parts)):
                package = ".".join(parts[:i])
                if package not in own_packages and package in MODULES:
                    graph[module].add(package)
    return graph


def test_the_walk_finds_the_edges_it_must():
    # Guards the walk itself: a function-level import and a from-package import are both seen.
    graph = import_graph()
    assert "trainers.run.checkpoint" in graph["trainers.run.loop"]
    assert "trainers.run.loop" in graph["trainers.cli"]  # imported inside cmd_run
    assert "trainers.rollout.environments.kinds.tools" in graph["trainers.rollout.environments.kinds"]
    # importing rollout.environments.kinds.procedural runs the kinds package's __init__ first
    assert "trainers.rollout.environments.kinds" in graph["trainers.demos.agent_demo"]


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph`, or [] when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return []


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
    "trainers.sandbox", "trainers.run", "trainers.update", "trainers.models", "trainers.distributed",
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
