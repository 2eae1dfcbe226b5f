"""Parsing DAGs never touches the network, and the provider is registered with Airflow's CLI.

The parse check runs in a fresh interpreter with ``socket.socket.connect``, ``connect_ex`` and
``socket.create_connection`` replaced by functions that fail the run: a deliberate patch, since
"nothing connected" cannot be observed otherwise. The Pulsar connection points at a closed port,
so even a connection attempt that slipped past the patch would fail to import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.airflow_env import AIRFLOW_BIN, AIRFLOW_ENV, DAGS_FOLDER
from tests.support.ports import free_port

PROJECT_DAGS = Path(__file__).parents[2] / "dags"

PARSE_WITHOUT_SOCKETS = """
import json, socket, sys

def refuse(*args, **kwargs):
    raise AssertionError(f"a socket was opened while parsing DAGs: {args!r}")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse

from airflow.dag_processing.dagbag import BundleDagBag
from airflow.serialization.serialized_objects import DagSerialization

parsed = {}
for folder in sys.argv[1:]:
    # As the DAG processor parses a bundle: its folder is on sys.path for the DAGs' own modules.
    bag = BundleDagBag(dag_folder=folder, bundle_path=folder)
    # Serializing is what the DAG processor stores; it also serializes asset watchers' triggers.
    for dag in bag.dags.values():
        DagSerialization.serialize_dag(dag)
    parsed[folder] = {"dags": sorted(bag.dags), "errors": bag.import_errors}
print(json.dumps(parsed))
"""


def test_every_dag_parses_without_opening_a_socket() -> None:
    folders = [str(DAGS_FOLDER)] + ([str(PROJECT_DAGS)] if PROJECT_DAGS.is_dir() else [])
    port = free_port()
    closed = {"conn_type": "pulsar", "host": "127.0.0.1", "port": port}
    closed["extra"] = {"admin_url": f"http://127.0.0.1:{port}"}
    env = {**os.environ, **AIRFLOW_ENV, "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(closed)}
    result = subprocess.run(
        [sys.executable, "-c", PARSE_WITHOUT_SOCKETS, *folders], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    for folder in folders:
        assert parsed[folder]["errors"] == {}, parsed[folder]["errors"]
    assert {"pulsar_alerts_consumer", "pulsar_backlog_deferred", "pulsar_produce_consume_individual"} <= set(
        parsed[str(DAGS_FOLDER)]["dags"]
    )


# Several ``airflow`` commands through the CLI's entry point, in one interpreter (each separate
# ``airflow`` process would pay Airflow's start-up again). The last one tests the connection for real.
CLI_COMMANDS = [
    *(["providers", name, "--output", "json"] for name in ("triggers", "queues", "widgets", "behaviours")),
    ["connections", "test", "pulsar_default"],
]
RUN_CLI = """
import json, sys
from airflow.__main__ import main

for argv in json.loads(sys.argv[1]):
    sys.argv = ["airflow", *argv]
    main()
    print(flush=True)
"""


def test_airflow_cli_knows_the_triggers_queue_and_connection_type(broker) -> None:
    connection = {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
    env = {
        **os.environ,
        **AIRFLOW_ENV,
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(connection),
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
    }
    result = subprocess.run(
        [str(AIRFLOW_BIN.with_name("python")), "-c", RUN_CLI, json.dumps(CLI_COMMANDS)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tables = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")]
    triggers, queues, widgets, behaviours = tables

    assert {row["class"] for row in triggers if row["package_name"] == "airflow-pulsar"} == {
        "airflow_pulsar.triggers.backlog",
        "airflow_pulsar.triggers.await_message",
        "airflow_pulsar.triggers.message_event",
        "airflow_pulsar.triggers.message_queue",
    }
    assert {"queue_class_names": "airflow_pulsar.queues.pulsar.PulsarMessageQueueProvider"} in queues
    # The connection form of the pulsar type: its extra fields and its relabelled standard fields.
    fields = {row["connection_parameter_name"] for row in widgets if row["package_name"] == "airflow-pulsar"}
    assert {"extra__pulsar__admin_url", "extra__pulsar__use_tls"} <= fields
    assert {"field_behaviours": "pulsar"} in behaviours
    # `airflow connections test` found PulsarHook for the pulsar type and reached the broker.
    assert "Connection success!" in result.stdout


def test_a_bad_dag_fails_at_parse_time_naming_the_argument(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_pulsar_dag.py").write_text(
        "from airflow.sdk import DAG\n"
        "from airflow_pulsar.operators.consume import PulsarConsumeOperator\n"
        "with DAG('bad_pulsar_dag', schedule=None):\n"
        "    PulsarConsumeOperator(task_id='c', topics='t', subscription='s', apply_function='pkg.f', ack='cumulative')\n"
    )
    bag = DagBag(dag_folder=tmp_path)
    (error,) = bag.import_errors.values()
    assert "ack='cumulative' needs an Exclusive or Failover subscription, got Shared" in error
