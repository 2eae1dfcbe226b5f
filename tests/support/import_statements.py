"""The import statements of the project's source modules, read with ``ast``: what the structure
tests (no import cycle, package boundaries) reason about. Imports at any scope count, type-only
ones included, and relative imports are made absolute."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceModule:
    """One module file and the dotted name it is imported by."""

    name: str
    path: Path
    is_package: bool  # a package's ``__init__``

    @property
    def package(self) -> str:
        """The package the module's relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class ImportStatement:
    """One ``import m`` (names empty) or ``from m import names``, with ``m`` absolute."""

    importer: str
    module: str
    names: tuple[str, ...]
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        what = f"from {self.module} import {', '.join(self.names)}" if self.names else f"import {self.module}"
        return f"{self.importer}:{self.line}: {what}"


def source_modules(packages: Mapping[str, Path]) -> dict[str, SourceModule]:
    """Every module under each folder, by its dotted name; ``packages`` maps an import name to its
    folder, as pyproject.toml's package-dir does. Generated protobuf modules are left out."""
    found = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            if path.name.endswith("_pb2.py"):
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            found[name] = SourceModule(name, path, is_package)
    return found


def _type_only_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes under an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def import_statements(module: SourceModule) -> Iterator[ImportStatement]:
    """Every import statement of ``module``, at any scope."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    type_only = _type_only_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield ImportStatement(module.name, alias.name, (), node.lineno, id(node) in type_only)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.package.split(".")
                base = parts[: len(parts) - node.level + 1] + ([node.module] if node.module else [])
                target = ".".join(base)
            else:
                target = node.module or ""
            names = tuple(alias.name for alias in node.names)
            yield ImportStatement(module.name, target, names, node.lineno, id(node) in type_only)
