"""One spark-submit of the ingest job, from the Airflow worker, through a ``SparkSubmitHook`` of its own.

Each submit builds the job archive (:mod:`.archive`) and a hook, and waits for spark-submit: a run
may submit twice (settling an unfinished batch, then writing the next one), and nothing of one
submit carries over to the next.

How the job reaches the driver depends on where the driver runs. In client mode (``local[*]``, or
any master without ``deploy_mode="cluster"``), and in cluster mode on YARN or Kubernetes, the
application is the job's ``__main__.py`` and the archive goes with ``--py-files``. A standalone
master runs no Python application in cluster mode: there the application is the archive itself,
as the jar the worker fetches into the driver's directory, and the driver runs Spark's
``PythonRunner``, which starts the archive's ``__main__.py``; the job then ships the archive to
its executors. Local paths in ``py_files`` must then exist on the workers. spark-submit waits for
that driver but exits with 0 whichever way it ended: the job's report in the plan log is what
tells that it succeeded.

Credentials never go on a command line or into the Spark configuration: they are files of mode
0600 in the submit's private directory (:mod:`.credentials`), shipped with ``--files``, whose paths
alone spark-submit is given. The standalone client hands a cluster-mode driver spark-submit's whole
environment, through the master: there spark-submit gets only what it and the job need
(:data:`SUBMIT_ENVIRONMENT`, ``env_vars`` and the crash-point settings), not the Airflow worker's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from .archive import build_job_archive
from .credentials import ShippedCredentials
from .job.faults import fault_environment

LOCAL_MASTER = "local[*]"
_JOB_SCRIPT = "airflow_pulsar.spark.job.__main__"
_PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
# Spark's standalone client takes only an application URL ending in .jar; a zip is a jar.
_STANDALONE_ARCHIVE = "airflow_pulsar_job.jar"
# Makes spark-submit wait for a standalone cluster's driver to end.
_WAIT_FOR_DRIVER = "spark.standalone.submit.waitAppCompletion"
_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: The variables of the Airflow worker's environment that spark-submit gets when the standalone
#: client passes its environment on to the cluster: those spark-submit and Spark read.
SUBMIT_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME")
SUBMIT_ENVIRONMENT_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_")
# Spark's JavaModuleOptions (spark-launcher 4.x): spark-submit gives them to a client-mode driver
# and the driver to its executors, but a standalone worker starts a cluster-mode driver without
# them, and Spark SQL fails there on reflection into the JDK (e.g. java.net.URI when overwriting).
_JAVA_MODULE_OPTIONS = " ".join(
    [
        "-XX:+IgnoreUnrecognizedVMOptions",
        "--add-modules=jdk.incubator.vector",
        *(
            f"--add-opens=java.base/{package}=ALL-UNNAMED"
            for package in (
                "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
                "java.util.concurrent", "java.util.concurrent.atomic", "jdk.internal.ref", "sun.nio.ch", "sun.nio.cs",
                "sun.security.action", "sun.util.calendar",
            )
        ),
        "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
        "-Djdk.reflect.useDirectMethodHandle=false",
        "-Dio.netty.tryReflectionSetAccessible=true",
    ]
)  # fmt: skip


@dataclass(frozen=True)
class SparkTarget:
    """Where spark-submit sends the job: the master and deploy mode, resolved from the Spark
    connection as SparkSubmitHook resolves them (``local[*]`` when the connection is missing)."""

    master: str
    deploy_mode: str | None

    @classmethod
    def of(cls, conn_id: str, deploy_mode: str | None) -> SparkTarget:
        """The target of connection ``conn_id``; ``deploy_mode`` overrides the connection's."""
        try:
            connection = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            return cls(LOCAL_MASTER, deploy_mode)
        host = connection.host or ""
        spark_url = connection.conn_type == "spark" and ("://" in host or not connection.port)
        master = host if spark_url else f"{connection.conn_type}://{host}"
        if connection.port:
            master = f"{master}:{connection.port}"
        return cls(master, deploy_mode or connection.extra_dejson.get("deploy-mode"))

    @property
    def local(self) -> bool:
        """Driver and executors run in processes of the submitting machine."""
        return self.master.startswith("local")

    @property
    def standalone_cluster(self) -> bool:
        """The driver runs on a worker of a standalone master."""
        return self.master.startswith("spark://") and self.deploy_mode == "cluster"


class JobSubmit:
    """One submit of the job with ``spec_argument`` (``IngestJobSpec.to_argument``) as its argument.

    ``hook_arguments`` are SparkSubmitHook's arguments but what to run (the application, its
    arguments and class). ``credentials`` are shipped with the job as files.
    """

    def __init__(self, hook_arguments: dict[str, Any], spec_argument: str, credentials: ShippedCredentials) -> None:
        self.arguments = dict(hook_arguments)
        self.arguments["conf"] = dict(self.arguments.get("conf") or {})
        self.spec_argument = spec_argument
        self.target = SparkTarget.of(self.arguments.get("conn_id", "spark_default"), self.arguments.get("deploy_mode"))
        self.credentials = credentials
        self.env = dict(self.arguments.get("env_vars") or {})
        if self.target.local:
            # Driver and executors run here: with this interpreter, which has the job's imports.
            self.env.setdefault("PYSPARK_PYTHON", sys.executable)
        self._hook: SparkSubmitHook | None = None

    def run(self) -> None:
        """Submit and wait for spark-submit; raises if it failed."""
        _spark_submit_on_path()
        py_files = [path for path in (self.arguments.get("py_files") or "").split(",") if path]
        popen: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="pulsar-ingest-") as workdir:
            shipped = [str(path) for path in self.credentials.write(Path(workdir))]
            files = [path for path in (self.arguments.get("files") or "").split(",") if path]
            self.arguments["files"] = ",".join([*files, *shipped]) or None
            if self.target.standalone_cluster:
                application = str(build_job_archive(Path(workdir), _STANDALONE_ARCHIVE))
                python_path = ",".join([_STANDALONE_ARCHIVE, *py_files])
                # PythonRunner's arguments: the file to run, relative to the driver's directory,
                # and the Python path; then the job's own.
                self.arguments.update(
                    java_class=_PYTHON_RUNNER,
                    py_files=None,
                    application_args=[_STANDALONE_ARCHIVE, python_path, "--spec", self.spec_argument, "--py-files", python_path],
                    # The hook refuses env_vars here; the standalone client hands the driver its own environment.
                    env_vars=None,
                )
                conf = self.arguments["conf"]
                conf.setdefault(_WAIT_FOR_DRIVER, "true")
                conf[_DRIVER_JAVA_OPTIONS] = f"{_JAVA_MODULE_OPTIONS} {conf.get(_DRIVER_JAVA_OPTIONS, '')}".strip()
                popen["env"] = {**submit_environment(), **self.env, **fault_environment()}
            else:
                job = importlib.util.find_spec(_JOB_SCRIPT)
                assert job is not None and job.origin is not None
                application = job.origin
                archive = str(build_job_archive(Path(workdir)))
                # A driver here finds the shipped files where they were written if Spark gives it no copies.
                files_dir = ["--files-dir", workdir] if shipped else []
                self.arguments.update(
                    py_files=",".join([archive, *py_files]),
                    application_args=["--spec", self.spec_argument, *files_dir],
                    env_vars=self.env or None,
                )
            with _local_master_if_undefined(self.arguments.get("conn_id", "spark_default")):
                self._hook = SparkSubmitHook(**self.arguments)
            self._hook.submit(application, **popen)

    def kill(self) -> None:
        """Stop the job, as the Spark provider stops a submit on this master and deploy mode."""
        if self._hook is not None:
            self._hook.on_kill()


def submit_environment() -> dict[str, str]:
    """What of this process's environment spark-submit gets when it hands its own to a cluster."""
    return {name: value for name, value in os.environ.items() if name in SUBMIT_ENVIRONMENT or name.startswith(SUBMIT_ENVIRONMENT_PREFIXES)}


def _spark_submit_on_path() -> None:
    """The Spark provider runs ``spark-submit`` from the PATH; a virtualenv that was not activated
    has pyspark's one next to its ``python`` only, so put that directory on this task's PATH."""
    beside_python = Path(sys.executable).with_name("spark-submit")
    if shutil.which("spark-submit") is None and beside_python.exists():
        os.environ["PATH"] = os.pathsep.join((str(beside_python.parent), os.environ.get("PATH", "")))


@contextmanager
def _local_master_if_undefined(conn_id: str) -> Iterator[None]:
    """Without a connection ``conn_id``, SparkSubmitHook would pick YARN: offer it local[*] instead,
    as a connection in the environment (Airflow's own lookup), for the time the hook is built."""
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        pass
    else:
        yield
        return
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    os.environ[variable] = json.dumps({"conn_type": "spark", "host": LOCAL_MASTER})
    try:
        yield
    finally:
        os.environ.pop(variable, None)
