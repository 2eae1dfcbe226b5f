"""Structural limits of the source tree: module and class sizes, and no import cycles in the
consumer and broker packages (type-only imports count: they tie the modules together for readers
and type checkers just the same)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = (ROOT / "client", ROOT / "broker", ROOT / "airflow_pulsar")
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 400


def source_modules() -> list[Path]:
    """Every hand-written module (generated protobuf code aside)."""
    return sorted(p for d in SOURCE_DIRS for p in d.rglob("*.py") if not p.name.endswith("_pb2.py"))


def test_no_module_over_the_limit() -> None:
    too_long = {str(p.relative_to(ROOT)): n for p in source_modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert too_long == {}


def test_no_class_over_the_limit() -> None:
    too_long = {}
    for path in source_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert too_long == {}


def package_imports(package: Path) -> dict[str, set[str]]:
    """Module name -> the modules of the same package it imports (relative imports, any scope)."""
    modules = {p.stem: p for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level != 1:
                continue
            if node.module is not None:
                target = node.module.split(".")[0]
                if target in modules:
                    graph[name].add(target)
            else:  # from . import a, b: modules, or names the package's __init__ defines
                graph[name].update(alias.name if alias.name in modules else "__init__" for alias in node.names)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path of module names, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


@pytest.mark.parametrize("package", ["client/consumer", "broker"])
def test_no_import_cycle(package: str) -> None:
    assert find_cycle(package_imports(ROOT / package)) is None


def test_the_cycle_check_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
