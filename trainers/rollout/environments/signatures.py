"""Tool schemas read from Python source without running it: each function's signature and docstring
become an OpenAI/Qwen-style schema. The docstring's first paragraph is the description, its "Args:"
(Google style) or "Parameters" (numpy style) section gives each parameter's description, the
annotations give the JSON types, and parameters without a default are required. Pure `ast`: the
studio's process never runs user code."""

from __future__ import annotations

import ast
import re
from typing import Any

ANNOTATION_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "dict": "object",
}


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:?\s*$")


_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


_NUMPY_ARG = re.compile(r"^\s*(\w+)\s*(?::\s*(.*))?$")


def parse_source(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise ValueError(f"cannot parse the code: {exc}") from None


def top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def schema_of(node: ast.FunctionDef) -> dict[str, Any]:
    """The function's schema from its signature and docstring; `ValueError` when it has no docstring."""
    doc = ast.get_docstring(node)
    if not doc:
        raise ValueError(f"function {node.name}() has no docstring: it tells the model what the tool does")
    description, arg_docs = parse_docstring(doc)
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ValueError(f"function {node.name}(): use named parameters only (no *args, **kwargs or /)")
    positional = args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    named = list(zip(positional, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    properties: dict[str, Any] = {}
    required = []
    for arg, default in named:
        prop: dict[str, Any] = {"type": _json_type(arg.annotation)}
        if arg.arg in arg_docs:
            prop["description"] = arg_docs[arg.arg]
        properties[arg.arg] = prop
        if default is None:
            required.append(arg.arg)
    parameters = {"type": "object", "properties": properties, "required": required}
    return function_schema(node.name, description, parameters)


def _json_type(annotation: ast.expr | None) -> str:
    if annotation is None:
        return "string"
    base = annotation.value if isinstance(annotation, ast.Subscript) else annotation  # list[int] -> list
    name = base.id if isinstance(base, ast.Name) else ast.unparse(base)
    return ANNOTATION_TYPES.get(name, "string")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google- or numpy-style docstring."""
    lines = doc.splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section, current = None, None
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        match = _SECTION.match(line)
        if match and (line.rstrip().endswith(":") or set(following.strip()) == {"-"}):
            section, current = match.group(1), None
            continue
        if section is None:
            if not line.strip() and description:
                section = "rest of description"
            elif line.strip():
                description.append(line.strip())
            continue
        if section not in ("Args", "Arguments", "Parameters") or set(line.strip()) == {"-"} or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        google = _GOOGLE_ARG.match(line) if section != "Parameters" else None
        numpy = _NUMPY_ARG.match(line) if section == "Parameters" and indent == _base_indent(lines, i) else None
        if google:
            current = google.group(1).lstrip("*")
            args[current] = google.group(3).strip()
        elif numpy:
            current = numpy.group(1)
            args[current] = ""
        elif current:  # a continuation line
            args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(description), args


def _base_indent(lines: list[str], i: int) -> int:
    """The indent of the first entry of the numpy section holding line `i`."""
    j = i
    while j > 0 and set(lines[j - 1].strip()) != {"-"}:
        j -= 1
    first = next((line for line in lines[j:] if line.strip()), "")
    return len(first) - len(first.lstrip())


def function_schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
