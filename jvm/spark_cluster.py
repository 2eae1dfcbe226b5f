"""A Spark standalone cluster on one machine: a master and two workers started from the
pip-installed pyspark with spark-class, on 127.0.0.1 and free ports, each stopped by its pid.
The ingest tests and the ingest benchmark submit jobs to it through an Airflow Spark connection
(:data:`CLUSTER_SPARK` gives the operator's Spark arguments)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from jvm.apache_pulsar import free_port
from jvm.spark_cds import QUICK_JVM_OPTIONS

SPARK_CLASS = str(Path(sys.executable).with_name("spark-class"))

# The Spark arguments of a job on the cluster: small executors, this interpreter as the job's
# Python (the worker runs on this machine), the driver reachable on 127.0.0.1, the quick JVM options
# where SPARK_SUBMIT_OPTS (tests/conftest.py) does not reach: executors, and a driver on the worker.
CLUSTER_SPARK: dict[str, Any] = {
    "conn_id": "spark_cluster",
    "executor_memory": "768m",
    "env_vars": {"PYSPARK_PYTHON": sys.executable},
    "conf": {
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": QUICK_JVM_OPTIONS,
        "spark.executor.extraJavaOptions": QUICK_JVM_OPTIONS,
    },
}


# The operator's wait for the job's report once spark-submit returned. In cluster deploy mode that
# is after the driver ended, which reports before it ends: a crashed driver's missing report shows at once.
REPORT_TIMEOUT_SECONDS = 5


class StandaloneCluster:
    """A Spark standalone master and its workers as child processes, stopped by pid.

    Each worker offers one core and 1 GB, and has its own work directory (``work/worker-<n>``):
    a job's two executors, or a cluster-mode driver and its executor, run on different workers."""

    WORKERS = 2

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
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM_OPTIONS,
        }

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    # The Airflow connection ``spark_cluster`` (CLUSTER_SPARK's conn_id), as an environment variable.
    connection_variable = "AIRFLOW_CONN_SPARK_CLUSTER"

    @property
    def connection(self) -> str:
        return json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": self.port})

    def _start(self, name: str, *args: str) -> None:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - kept open by the child
        self.processes.append(subprocess.Popen([SPARK_CLASS, *args], stdout=log, stderr=log, env=self.env))
        log.close()

    def start(self) -> StandaloneCluster:
        self._start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.web_port),
        )
        for number in range(1, self.WORKERS + 1):
            self._start(
                f"worker-{number}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--webui-port", str(free_port()), "--cores", "1", "--memory", "1024m",
                "--work-dir", str(self.directory / "work" / f"worker-{number}"), self.master_url,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for process in self.processes:
                assert process.poll() is None, (self.directory / "master.log").read_text()[-3000:]
            try:
                state = httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=2).json()
                alive = [worker for worker in state.get("workers", []) if worker["state"] == "ALIVE"]
                if state.get("status") == "ALIVE" and len(alive) == self.WORKERS:
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError("the standalone cluster did not come up within 90 s")

    def completed(self, kind: str) -> list[dict]:
        """The master's finished ``apps`` or ``drivers``."""
        return httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=5).json()[f"completed{kind}"]

    @property
    def worker_pids(self) -> list[int]:
        """The workers' processes, under which drivers in cluster deploy mode and executors run."""
        return [process.pid for process in self.processes[1:]]

    def wait_idle(self, timeout_seconds: float = 120) -> None:
        """Wait until no application or driver runs on the cluster (one that lost its task or
        driver ends a little later, and holds its cores until then)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            state = httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=5).json()
            running = [*state["activeapps"], *state.get("activedrivers", [])]
            if not running:
                return
            assert time.monotonic() < deadline, f"still running after {timeout_seconds:g} s: {running}"
            time.sleep(0.5)

    def workers_with(self, pattern: str) -> set[str]:
        """The workers (``worker-<n>``) whose work directory holds ``pattern``: an application id
        (its executors' directories) or ``driver-*`` (drivers run in cluster deploy mode)."""
        return {path.parent.name for path in (self.directory / "work").glob(f"worker-*/{pattern}")}

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
