"""The same ingest on a Spark standalone cluster: a master and a worker started from the
pip-installed pyspark with spark-class, on 127.0.0.1 and free ports, reached through an Airflow
Spark connection. The executors run in the worker's JVM, not in the submitting process; in
cluster deploy mode the driver runs there too, from the job archive the worker fetched."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.standalone.process import BrokerProcess
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.spark.job.faults import FAULT_ENV
from spark_helpers import VALUE_SCHEMA, Catalog, assert_exactly_once, produce_json

SPARK_CLASS = str(Path(sys.executable).with_name("spark-class"))

# Spark's deploy modes, not the broker, are the subject here (see conftest.py).
pytestmark = pytest.mark.one_broker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandaloneCluster:
    """A Spark standalone master and one worker as child processes, stopped by pid."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.web_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,  # lets spark-class find the pip-installed SPARK_HOME
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(directory),
            # Short-lived daemons on a busy machine: the C1 compiler only starts them faster.
            "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        }

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - kept open by the child
        self.processes.append(subprocess.Popen([SPARK_CLASS, *args], stdout=log, stderr=log, env=self.env))
        log.close()

    def start(self) -> StandaloneCluster:
        self._start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.web_port),
        )
        self._start(
            "worker", "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--webui-port", str(free_port()), "--cores", "2", "--memory", "1536m",
            "--work-dir", str(self.directory / "work"), self.master_url,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for process in self.processes:
                assert process.poll() is None, (self.directory / "master.log").read_text()[-3000:]
            try:
                state = httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=2).json()
                if state.get("status") == "ALIVE" and any(w["state"] == "ALIVE" for w in state.get("workers", [])):
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError("the standalone cluster did not come up within 90 s")

    def completed(self, kind: str) -> list[dict]:
        """The master's finished ``apps`` or ``drivers``."""
        return httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=5).json()[f"completed{kind}"]

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)


@pytest.fixture
def spark_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandaloneCluster]:
    """A started cluster, named by the Spark connection ``spark_cluster``."""
    directory = tmp_path / "spark-cluster"
    directory.mkdir()
    started = StandaloneCluster(directory)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": started.port}))
    try:
        yield started.start()
    finally:
        started.stop()


def cluster_ingest(catalog: Catalog, topic: str, subscription: str, table: str, **spark: Any) -> PulsarToTableOperator:
    """An ingest of JSON messages into ``table`` on the cluster, with ``spark`` arguments added."""
    return PulsarToTableOperator(
        task_id="ingest",
        topics=topic,
        subscription=subscription,
        table=table,
        value_format="json",
        value_schema=VALUE_SCHEMA,
        min_partitions=4,
        conn_id="spark_cluster",
        executor_memory="768m",
        # The worker runs on this machine: the job's Python may be this interpreter.
        env_vars={"PYSPARK_PYTHON": sys.executable},
        conf={
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
        **spark,
        **catalog.operator_args(),
    )


def test_the_job_runs_unchanged_on_a_standalone_cluster(
    pulsar_default: BrokerProcess, spark_cluster: StandaloneCluster, catalog: Catalog, topic_name: str
) -> None:
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 3)
        produce_json(pulsar_default.service_url, topic_name, 0, 5_000, batch=200)

        result = cluster_ingest(catalog, topic_name, "to-cluster", "on_cluster", total_executor_cores=2).execute(context={})

        assert result["total_rows"] == 5_000
        assert admin.backlog(topic_name, "to-cluster").msg_backlog == 0
    assert_exactly_once(catalog.rows("on_cluster"), range(5_000))
    apps = spark_cluster.completed("apps")
    assert [app["name"] for app in apps] == ["pulsar-ingest-to-cluster"] and apps[0]["state"] == "FINISHED"
    assert apps[0]["memoryperslave"] == 768  # executor sizing reached the cluster
    # In client mode only executors run tasks: the worker launched one for the application.
    assert list((spark_cluster.directory / "work").glob(f"{apps[0]['id']}/*/stderr"))
    assert not spark_cluster.completed("drivers")


def test_cluster_deploy_mode_settles_a_crashed_batch_and_writes_the_next_in_one_run(
    pulsar_default: BrokerProcess, spark_cluster: StandaloneCluster, catalog: Catalog, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's 2 cores and 1536 MB hold the driver (1 core, 512 MB) and one executor.
    operator = cluster_ingest(
        catalog,
        topic_name,
        "in-cluster",
        "from_cluster",
        deploy_mode="cluster",
        driver_memory="512m",
        total_executor_cores=1,
        report_timeout_seconds=15,
    )
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 2)
        produce_json(pulsar_default.service_url, topic_name, 0, 2_000, batch=100)
        # The driver dies once the table holds the batch, before reporting it (spark-submit's
        # environment reaches it through the standalone client).
        monkeypatch.setenv(FAULT_ENV, "after-write")
        with pytest.raises(RuntimeError, match="ended without reporting it"):
            operator.execute(context={})
        monkeypatch.delenv(FAULT_ENV)
        assert catalog.rows("from_cluster").num_rows == 2_000
        assert admin.message_backlog(topic_name, "in-cluster").messages == 2_000
        produce_json(pulsar_default.service_url, topic_name, 2_000, 1_000, batch=100)

        result = operator.execute(context={})

        # Two submits in one run: the crashed batch written again under its id, then the new one.
        assert result["settled"]["was"] == "planned" and result["settled"]["total_rows"] == 2_000
        assert result["skipped"] is False and result["total_rows"] == 1_000
        assert result["batch_id"] != result["settled"]["batch_id"]
        assert admin.backlog(topic_name, "in-cluster").msg_backlog == 0
    rows = catalog.rows("from_cluster")
    assert_exactly_once(rows, range(3_000))
    assert set(rows.column("batch_id").to_pylist()) == {result["batch_id"], result["settled"]["batch_id"]}
    # Every driver ran on the worker, from the archive it fetched: one failed, two finished.
    drivers = spark_cluster.completed("drivers")
    assert sorted(driver["state"] for driver in drivers) == ["FAILED", "FINISHED", "FINISHED"]
    assert all(driver["mainclass"] == "org.apache.spark.deploy.PythonRunner" for driver in drivers)
    assert len(list((spark_cluster.directory / "work").glob("driver-*/airflow_pulsar_job.jar"))) == 3
