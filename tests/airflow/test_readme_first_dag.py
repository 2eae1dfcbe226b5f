"""The README's first DAG, run as written: its code block is saved into the DAGs folder of a fresh
AIRFLOW_HOME, and ``airflow dags test`` runs it against the embedded broker process, the
``pulsar_default`` connection given by ``AIRFLOW_CONN_PULSAR_DEFAULT``, as the README says.

The broker is started here rather than taken from the ``broker`` fixture: the README's steps start
the embedded broker, and one run of Airflow's command line is what this checks.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin

README = Path(__file__).resolve().parents[2] / "README.md"
AIRFLOW = Path(sys.executable).with_name("airflow")
SECTION = "## A first DAG"


def first_dag_source() -> str:
    """The first ``python`` code block under the README's "A first DAG" heading."""
    text = README.read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, f"no python code block under {SECTION!r}"
    return block.group(1)


@pytest.fixture(scope="module")
def embedded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """``airflow-pulsar standalone`` on free ports, as the README's steps start it."""
    process = BrokerProcess(tmp_path_factory.mktemp("first-dag-broker")).start()
    try:
        yield process
    finally:
        process.stop()


def xcoms(database: Path, dag_id: str) -> dict[str, Any]:
    """task id -> its ``return_value`` XCom, read from the Airflow database the run wrote."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT task_id, value FROM xcom WHERE dag_id = ? AND key = 'return_value'", (dag_id,)).fetchall()
    return {task_id: json.loads(value) for task_id, value in rows}


def test_the_readme_first_dag_runs_as_written(embedded_broker: BrokerProcess, tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "first_orders.py").write_text(first_dag_source())
    env = {
        # A newcomer's shell: nothing of this test process's own Airflow settings leaks in.
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # The README's URI names the default ports; this broker's are free ones, so the admin URL is given.
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": embedded_broker.service_url, "extra": {"admin_url": embedded_broker.web_url}}
        ),
    }
    for command in (["db", "migrate"], ["dags", "test", "first_orders"]):
        result = subprocess.run([AIRFLOW, *command], env=env, capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"airflow {' '.join(command)} failed:\n{output[-4000:]}"
    assert "state=success" in output, output[-4000:]

    results = xcoms(home / "airflow.db", "first_orders")
    assert results["produce"]["messages"] == 10
    assert results["produce"]["topic"] == "first-orders"
    assert results["subscribe"]["created"] is True
    assert results["wait_for_orders"]["messages"] == 10
    assert results["consume"]["messages"] == results["consume"]["acknowledged"] == 10
    assert 'order from customer-0: {"order": 0}' in output  # the function ran on each message
    with PulsarAdmin(embedded_broker.web_url) as admin:
        assert admin.backlog("first-orders", "order-reader").msg_backlog == 0
