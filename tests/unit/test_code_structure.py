"""Structural limits of the source tree: module and class sizes (import cycles:
``test_import_cycles.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

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

