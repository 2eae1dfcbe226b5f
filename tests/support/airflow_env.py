"""Airflow settings shared by the test folders that run Airflow (tests/airflow, tests/spark,
tests/cluster).

Imported by their conftest files before anything imports airflow (it reads its configuration
once, on import); one module, so every folder in a test process shares one throwaway
AIRFLOW_HOME with unit-test mode, no examples, the test DAGs folder and the plugins folder, which
Airflow puts on the import path when it starts.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

AIRFLOW_HOME = tempfile.mkdtemp(prefix="airflow-home-")
AIRFLOW_TESTS = Path(__file__).resolve().parents[1] / "airflow"
# DAG files used by the tests; dag.test() needs them inside the DAGs folder.
DAGS_FOLDER = AIRFLOW_TESTS / "dags"
# The test DAGs' user functions. Every Airflow component (the triggerer too) imports from the
# plugins folder, while only the dag-processor and the workers import from the DAGs folder.
PLUGINS_FOLDER = AIRFLOW_TESTS / "plugins"
AIRFLOW_ENV = {
    "AIRFLOW_HOME": AIRFLOW_HOME,
    "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
    # Asset watchers are registered only for DAGs that are not paused.
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{os.path.join(AIRFLOW_HOME, 'airflow.db')}",
}
os.environ.update(AIRFLOW_ENV)
if "airflow" in sys.modules:  # pragma: no cover - a guard for unusual collection orders
    import warnings

    warnings.warn("airflow was imported before tests/support/airflow_env.py set AIRFLOW_HOME", stacklevel=1)

AIRFLOW_BIN = Path(sys.executable).with_name("airflow")
