"""Spark ingestion tests: Airflow settings (shared with tests/airflow), a Pulsar connection to the
module's broker, per-test catalog directories (Derby lets one process at a time use a metastore),
ingest tasks in processes of their own, to kill at crash points, and a Spark standalone cluster
per module for the tiers that submit to one."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess

# Sets AIRFLOW_HOME and friends before anything imports airflow.
from airflow_pulsar.client.admin import PulsarAdmin
from jvm.spark_cluster import StandaloneCluster
from tests.support.airflow_env import AIRFLOW_HOME
from tests.support.crash_matrix import CrashCell
from tests.support.ingest_task import IngestTasks
from tests.support.spark_ingest import Catalog

VENV_BIN = str(Path(sys.executable).parent)
DAGS = Path(__file__).parent / "dags"


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def spark_submit_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit is the one pip installed with pyspark into this environment, as on a worker."""
    monkeypatch.setenv("PATH", VENV_BIN + os.pathsep + os.environ.get("PATH", ""))


@pytest.fixture
def pulsar_default(broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch) -> BrokerProcess:
    """The default Pulsar connection points at the module's broker."""
    conn = {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_DEFAULT", json.dumps(conn))
    return broker


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    """A warehouse and a Derby metastore of the test's own."""
    return Catalog(tmp_path / "warehouse", tmp_path / "metastore")


@pytest.fixture
def ingest_tasks(tmp_path: Path) -> Iterator[IngestTasks]:
    """Ingest tasks the test runs in processes of their own; what is left of them is killed after it."""
    tasks = IngestTasks(tmp_path / "tasks")
    try:
        yield tasks
    finally:
        tasks.clean_up()


@pytest.fixture
def crash_cell(pulsar_default: BrokerProcess, catalog: Catalog, topic_name: str, ingest_tasks: IngestTasks) -> Iterator[CrashCell]:
    """A cell of the crash matrix (tests/support/crash_matrix.py), on the module's broker."""
    with PulsarAdmin(pulsar_default.web_url) as admin:
        yield CrashCell(pulsar_default.service_url, admin, catalog, topic_name, ingest_tasks)


@pytest.fixture
def spark_test_dags(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> object:
    """The DAGs of tests/spark/dags as a second DAG bundle next to the DAGs folder: dag.test()
    finds a DAG through the bundles."""
    from airflow.dag_processing.dagbag import DagBag

    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {"name": "spark-tests", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {"path": str(DAGS)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    bag = DagBag(dag_folder=DAGS)
    assert not bag.import_errors, bag.import_errors
    return bag


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One started standalone cluster for the module, named by the Spark connection ``spark_cluster``
    (a test tells its own applications and drivers by those completed before it began)."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(cluster.connection_variable, cluster.connection)
        try:
            yield cluster.start()
        finally:
            cluster.stop()


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> dict:
    """What JobSubmit hands spark-submit, captured instead of running it."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    seen: dict = {}

    def submit(hook: SparkSubmitHook, application: str, **popen: object) -> None:
        archive = zipfile.ZipFile(application).namelist() if application.endswith(".jar") else None
        shipped = {path: (Path(path).stat().st_mode & 0o777, Path(path).read_bytes()) for path in (hook._files or "").split(",") if path}
        command = hook._build_spark_submit_command(application)
        # The hook's own environment for spark-submit, which building the command settles.
        seen.update(command=command, popen=popen, archive=archive, files=shipped, hook_env=hook._env)

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "spark://master", "port": 7077}))
    return seen
