"""Running the test DAGs with dag.test() and reading what they left: task states and XComs (also
those a run of Airflow's command line left in its SQLite database)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from tests.support.airflow_env import DAGS_FOLDER

DOCS_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@dataclass
class DagRunResult:
    """The outcome of one dag.test() run."""

    state: str
    states: dict[str, str]
    xcoms: dict[str, Any]
    seconds: float
    run_id: str = ""


@cache
def dag_bag() -> Any:
    """The DAGs of tests/airflow/dags, parsed once per test process."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAGS_FOLDER)
    assert not bag.import_errors, bag.import_errors
    return bag


def run_dag(dag_id: str, *, logical_date: datetime | None = None, **conf: Any) -> DagRunResult:
    """Run a test DAG once with ``dag_run.conf = conf``; tasks and deferred triggers run in this process.

    With ``logical_date`` (also the run's ``run_after``) the run id is fixed, so a second call runs
    the same task instances again, replacing the first run.
    """
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    dag = dag_bag().get_dag(dag_id)
    assert dag is not None, f"no DAG {dag_id} in {DAGS_FOLDER}"
    started = time.monotonic()
    moment = {"logical_date": logical_date, "run_after": logical_date} if logical_date is not None else {}
    run = dag.test(run_conf=conf, **moment)
    seconds = time.monotonic() - started
    with create_session() as session:
        tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id))
        states = {ti.task_id: str(ti.state) for ti in tis}
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, key="return_value", dag_ids=dag_id))
        xcoms = {row.task_id: XComModel.deserialize_value(row) for row in rows}
    return DagRunResult(str(run.state), states, xcoms, seconds, run.run_id)


def subscription_stats(admin: Any, topic: str, subscription: str) -> dict[str, Any]:
    """The subscription's entry in the topic's (or partitioned topic's) admin stats."""
    if admin.partition_count(topic):
        stats = admin.partitioned_stats(topic)
    else:
        stats = admin.topic_stats(topic)
    return stats["subscriptions"][subscription]


def xcoms_in_database(database: Path, dag_id: str) -> dict[str, Any]:
    """task id -> its ``return_value`` XCom, read from the SQLite Airflow database a run wrote."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT task_id, value FROM xcom WHERE dag_id = ? AND key = 'return_value'", (dag_id,)).fetchall()
    # The value column has JSON's (numeric) affinity: SQLite hands a number back as one, not as text.
    return {task_id: json.loads(value) if isinstance(value, (str, bytes)) else value for task_id, value in rows}


# Runs one DAG with dag.test() at a fixed logical date (so a later run has the same run id).
_RUN_IN_CHILD = """
import json, sys
from datetime import datetime

from airflow.dag_processing.dagbag import DagBag

folder, dag_id, conf, moment = sys.argv[1:]
dag = DagBag(dag_folder=folder).get_dag(dag_id)
when = datetime.fromisoformat(moment)
dag.test(logical_date=when, run_after=when, run_conf=json.loads(conf))
"""


def dag_run_process(dag_id: str, conf: dict[str, Any], logical_date: datetime, log: Path) -> subprocess.Popen[bytes]:
    """A run of a test DAG (``dag.test()``) in a process of its own, for a test to kill; its output
    goes to ``log``. ``run_dag`` with the same ``logical_date`` runs the same task instances again."""
    from airflow.configuration import conf as airflow_conf

    # The two processes share the metadata database, so the child encrypts with this one's key
    # (Airflow makes up a key per process when none is configured).
    env = {**os.environ, "AIRFLOW__CORE__FERNET_KEY": airflow_conf.get("core", "fernet_key")}
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-c", _RUN_IN_CHILD, str(DAGS_FOLDER), dag_id, json.dumps(conf), logical_date.isoformat()],
            env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip


def run_docs_example_dag(dag_id: str, broker: Any, home: Path) -> dict[str, Any]:
    """Run a DAG of docs/examples/dags as a user would, ``airflow dags test``, in a fresh
    ``AIRFLOW_HOME`` whose DAGs and plugins folders are the docs' and whose default Pulsar connection
    is ``broker``'s; fails unless the run succeeds; task id -> its ``return_value`` XCom."""
    home.mkdir()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DOCS_EXAMPLES / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(DOCS_EXAMPLES / "plugins"),
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
        ),
    }
    airflow = Path(sys.executable).with_name("airflow")
    for command in (["db", "migrate"], ["dags", "test", dag_id]):
        result = subprocess.run([airflow, *command], env=env, capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"airflow {' '.join(command)} failed:\n{output[-4000:]}"
    assert "state=success" in output, output[-4000:]
    return xcoms_in_database(home / "airflow.db", dag_id)
