"""The first DAG of the docs' getting-started page, run as shown: the page includes
docs/examples/dags/first_orders.py whole, this copies that file into the DAGs folder of a fresh
AIRFLOW_HOME, and ``airflow dags test`` runs it against the embedded broker process, the
``pulsar_default`` connection given by ``AIRFLOW_CONN_PULSAR_DEFAULT``, as the page says.

The broker is started here rather than taken from the ``broker`` fixture: the page's steps start
the embedded broker, and one run of Airflow's command line is what this checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.dag_runs import xcoms_in_database as xcoms

DOCS = Path(__file__).resolve().parents[2] / "docs"
FIRST_DAG = DOCS / "examples" / "dags" / "first_orders.py"
AIRFLOW = Path(sys.executable).with_name("airflow")


def test_the_readme_shows_the_same_dag() -> None:
    """The README repeats the first DAG: its first ``python`` block is the file, byte for byte."""
    readme = (DOCS.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert block is not None, "README.md has no python code block"
    assert block.group(1) == FIRST_DAG.read_text()


def test_the_getting_started_page_shows_the_whole_file() -> None:
    """The page includes the file whole (no lines picked), so what runs below is what a reader sees."""
    page = (DOCS / "getting-started.md").read_text()
    include = re.search(r"```\{literalinclude\} examples/dags/first_orders.py\n(.*?)```", page, re.DOTALL)
    assert include is not None, "getting-started.md does not include examples/dags/first_orders.py"
    options = [line for line in include.group(1).splitlines() if line.strip()]
    assert all(option.startswith(":language:") for option in options), options


@pytest.fixture(scope="module")
def embedded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """``airflow-pulsar standalone`` on free ports, as the page's steps start it."""
    process = BrokerProcess(tmp_path_factory.mktemp("first-dag-broker")).start()
    try:
        yield process
    finally:
        process.stop()



def test_the_first_dag_runs_as_shown(embedded_broker: BrokerProcess, tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    shutil.copy(FIRST_DAG, home / "dags" / "first_orders.py")
    env = {
        # A newcomer's shell: nothing of this test process's own Airflow settings leaks in.
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # The page's URI names the default ports; this broker's are free ones, so the admin URL is given.
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
