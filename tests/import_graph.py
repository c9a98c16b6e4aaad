"""The import graph of packages of this repository, read from their source (not by importing them),
for the layout tests that forbid import circles (tests/trainers/test_layout.py, tests/test_import_circles.py).

An edge is every import of a module of the walked packages: at module level, inside functions and under
TYPE_CHECKING alike, and the package `__init__` modules an import runs first."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(*packages: str) -> dict[str, Path]:
    """{dotted module name: its file} for every module of `packages` (top-level folders of the repository);
    Django's migrations are left out: nothing imports them."""
    return {
        module_name(path): path
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    }


def resolve(modules: dict[str, Path], target: str) -> str | None:
    """The module an imported dotted name lives in (a name imported from a module is not a module)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def imports(modules: dict[str, Path], module: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module of `modules`, statement, inside a function) for every import in `module`."""
    path = modules[module]
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
            target = resolve(modules, name)
            if target and target != module:
                found.append((target, node, id(node) in in_function))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the modules of `modules` importing it runs}."""
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module in modules:
        own_packages = {module.rsplit(".", i)[0] for i in range(module.count(".") + 1)}
        for target, _, _ in imports(modules, module):
            graph[module].add(target)
            # Importing a.b.c runs a/__init__ and a/b/__init__ first: those are edges too, unless
            # they are packages the importer is already inside.
            parts = target.split(".")
            for i in range(2, len(parts)):
                package = ".".join(parts[:i])
                if package not in own_packages and package in modules:
                    graph[module].add(package)
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph`, or [] when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return []
