"""Airflow test settings: a throwaway AIRFLOW_HOME, unit-test mode, no examples, no database.

Set at import, before anything imports airflow (it reads its configuration once, on import).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

AIRFLOW_HOME = tempfile.mkdtemp(prefix="airflow-home-")
AIRFLOW_ENV = {
    "AIRFLOW_HOME": AIRFLOW_HOME,
    "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(AIRFLOW_HOME, "dags"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{os.path.join(AIRFLOW_HOME, 'airflow.db')}",
}
os.environ.update(AIRFLOW_ENV)
if "airflow" in sys.modules:  # pragma: no cover - a guard for unusual collection orders
    import warnings

    warnings.warn("airflow was imported before tests/airflow/conftest.py set AIRFLOW_HOME", stacklevel=1)

AIRFLOW_BIN = Path(sys.executable).with_name("airflow")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture
def pulsar_conn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Define an Airflow connection through AIRFLOW_CONN_<ID>: a URI string, or keyword fields as JSON."""

    def define(uri: str | None = None, conn_id: str = "pulsar_default", **fields: object) -> None:
        value = uri if uri is not None else json.dumps({"conn_type": "pulsar", **fields})
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", value)

    yield define
