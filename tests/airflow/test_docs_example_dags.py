"""The operators' examples of the docs, run as shown: docs/examples/dags/orders_operators.py, whose
marked parts the pages include, runs with ``airflow dags test`` in a fresh AIRFLOW_HOME whose DAGs
and plugins folders are the docs' (the user functions, ``my_project``, in the plugins folder as the
pages advise), against the embedded broker process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from tests.airflow.test_first_dag import xcoms

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
AIRFLOW = Path(sys.executable).with_name("airflow")


@pytest.fixture(scope="module")
def embedded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("docs-examples-broker")).start()
    try:
        yield process
    finally:
        process.stop()


def test_every_marked_part_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in EXAMPLES.parent.glob("*.md"))
    source = (EXAMPLES / "dags" / "orders_operators.py").read_text()
    for marker in re.findall(r"# \[START (\w+)\]", source):
        assert f"examples/dags/orders_operators.py\n:language: python\n:start-after: [START {marker}]" in pages, marker


def test_the_operators_examples_run(embedded_broker: BrokerProcess, tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    home.mkdir()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLES / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(EXAMPLES / "plugins"),
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": embedded_broker.service_url, "extra": {"admin_url": embedded_broker.web_url}}
        ),
    }
    for command in (["db", "migrate"], ["dags", "test", "orders_operators"]):
        result = subprocess.run([AIRFLOW, *command], env=env, capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"airflow {' '.join(command)} failed:\n{output[-4000:]}"
    assert "state=success" in output, output[-4000:]

    results = xcoms(home / "airflow.db", "orders_operators")
    assert results["orders_topic"]["partitions"] == 4
    assert results["publish_orders"]["messages"] == 10_000
    assert results["wait_for_orders"]["messages"] == 10_000
    assert results["wait_for_order_42"]["message"]["value"] is not None
    assert results["load_orders"]["messages"] == results["load_orders"]["acknowledged"] == 10_000
    assert results["load_events"]["dead_lettered"] == 1
    with PulsarAdmin(embedded_broker.web_url) as admin:
        assert admin.backlog("orders", "warehouse").msg_backlog == 0
        assert admin.message_backlog("events-dead", "audit").messages == 1
