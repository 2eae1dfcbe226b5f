"""The same ingest on a Spark standalone cluster: a master and a worker started from the
pip-installed pyspark with spark-class, on 127.0.0.1 and free ports, reached through an Airflow
Spark connection. The executors run in the worker's JVM, not in the submitting process."""

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

import httpx
import pytest

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.standalone.process import BrokerProcess
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from spark_helpers import VALUE_SCHEMA, Catalog, assert_exactly_once, produce_json

SPARK_CLASS = str(Path(sys.executable).with_name("spark-class"))


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

    def applications(self) -> list[dict]:
        return httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=5).json()["completedapps"]

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
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    directory = tmp_path / "spark-cluster"
    directory.mkdir()
    started = StandaloneCluster(directory)
    try:
        yield started.start()
    finally:
        started.stop()


def test_the_job_runs_unchanged_on_a_standalone_cluster(
    pulsar_default: BrokerProcess,
    cluster: StandaloneCluster,
    catalog: Catalog,
    topic_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 3)
        produce_json(pulsar_default.service_url, topic_name, 0, 5_000, batch=200)
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.port})
        )

        result = PulsarToTableOperator(
            task_id="ingest",
            topics=topic_name,
            subscription="to-cluster",
            table="on_cluster",
            value_format="json",
            value_schema=VALUE_SCHEMA,
            min_partitions=4,
            conn_id="spark_cluster",
            executor_memory="768m",
            total_executor_cores=2,
            # The worker runs on this machine: its executors may use this interpreter.
            env_vars={"PYSPARK_PYTHON": sys.executable},
            conf={
                "spark.driver.host": "127.0.0.1",
                "spark.ui.enabled": "false",
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            },
            **catalog.operator_args(),
        ).execute(context={})

        assert result["total_rows"] == 5_000
        assert admin.backlog(topic_name, "to-cluster").msg_backlog == 0
    assert_exactly_once(catalog.rows("on_cluster"), range(5_000))
    apps = cluster.applications()
    assert [app["name"] for app in apps] == ["pulsar-ingest-to-cluster"] and apps[0]["state"] == "FINISHED"
    assert apps[0]["memoryperslave"] == 768  # executor sizing reached the cluster
    # In client mode only executors run tasks: the worker launched one for the application.
    assert list((cluster.directory / "work").glob(f"{apps[0]['id']}/*/stderr"))
