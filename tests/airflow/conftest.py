"""Airflow test settings: a throwaway AIRFLOW_HOME, unit-test mode, no examples, the test DAGs folder.

Set at import, before anything imports airflow (it reads its configuration once, on import).
The metadata database (SQLite in AIRFLOW_HOME) is created on demand by the ``airflow_db`` fixture
(tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator

import pytest

# Shared with tests/spark and tests/cluster: sets the environment on import, the plugins folder
# among it. The user functions of the test DAGs (pulsar_test_functions) are named by dotted path;
# tasks and triggers import them in this process from the plugins folder, which Airflow puts on the
# import path when it starts, as in every Airflow component.
from tests.support.airflow_env import AIRFLOW_HOME


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture
def pulsar_conn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Define an Airflow connection through AIRFLOW_CONN_<ID>: a URI string, or keyword fields as JSON."""

    def define(uri: str | None = None, conn_id: str = "pulsar_default", **fields: object) -> None:
        value = uri if uri is not None else json.dumps({"conn_type": "pulsar", **fields})
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", value)

    yield define


@pytest.fixture
def broker_admin(broker, pulsar_conn, airflow_db) -> Iterator:
    """The default Pulsar connection points at the module's broker (service and admin URLs); yields
    a blocking admin client on it for the test's own checks."""
    from airflow_pulsar.client.admin import PulsarAdmin

    pulsar_conn(host=broker.service_url, extra={"admin_url": broker.web_url})
    with PulsarAdmin(broker.web_url) as admin:
        yield admin
