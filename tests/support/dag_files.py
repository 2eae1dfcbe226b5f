"""A DAG file loaded as a module of its own, as Airflow's DAG processor loads one, for a test that
reads what the file defines (its DAG's tasks, its assets' watchers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_dag_file(path: Path, module_name: str | None = None) -> ModuleType:
    """Execute the DAG file ``path`` as a new module (named ``module_name``, else after the file);
    the DAG file imports what it needs by absolute name, so its folder need not be on the import path."""
    spec = importlib.util.spec_from_file_location(module_name or path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
