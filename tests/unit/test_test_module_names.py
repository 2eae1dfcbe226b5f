"""No two test modules share a file name: pytest imports the test folders that are not packages by
their file names alone, and a second module of the same name fails to collect."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own() -> None:
    folders: dict[str, list[str]] = defaultdict(list)
    for module in TESTS.rglob("test_*.py"):
        folders[module.name].append(str(module.parent.relative_to(TESTS)))
    assert {name: where for name, where in folders.items() if len(where) > 1} == {}
