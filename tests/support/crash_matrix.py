"""One cell of the ingest's crash matrix: a run of the ingest task dies of a process killed with
SIGKILL while the run holds at a crash point, then a rerun must leave each message in the table
once and the backlog at 0 (tests/spark/test_crash_matrix_*.py, ``make test-crashes``).

The cells: every crash point, with every kind of process a death there can be (see
:data:`tests.support.ingest_task.KILLABLE`), for each table format, on each Spark master: local,
a standalone cluster in client deploy mode (the driver is spark-submit's JVM, executors run on the
workers) and in cluster deploy mode (the driver runs on a worker too).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.spark_cluster import CLUSTER_SPARK, REPORT_TIMEOUT_SECONDS, StandaloneCluster
from tests.support.ingest_task import KILLABLE, PYTHON_WORKER, SUBMIT_AND_TASK, IngestTasks, crash
from tests.support.lakehouse_tables import LakehouseTable
from tests.support.spark_ingest import Catalog, assert_exactly_once, produce_json

MESSAGES = 1_000
SUBSCRIPTION = "crash-matrix"
KINDS = ("parquet", "delta-location", "iceberg-hadoop")
LOCAL, CLIENT_MODE, CLUSTER_MODE = "local", "standalone-client", "standalone-cluster"
MASTERS = (LOCAL, CLIENT_MODE, CLUSTER_MODE)
# (point, process killed) of every cell of a format and master.
CELLS = [(point, kill) for point, kills in KILLABLE.items() for kill in kills]
# CRASH_MATRIX=full runs every cell on every master for every format; by default (and in CI) each
# master runs every (point, process killed) once, with the formats rotated across the masters, so
# that each (point, process killed) still meets every format, in a third of the time.
FULL = os.environ.get("CRASH_MATRIX") == "full"


def cells(master: str) -> list[tuple[str, str, str]]:
    """The (point, process killed, table format) cells that run on ``master``."""
    if FULL:
        return [(point, kill, kind) for point, kill in CELLS for kind in KINDS]
    shift = MASTERS.index(master)
    return [(point, kill, KINDS[(index + shift) % len(KINDS)]) for index, (point, kill) in enumerate(CELLS)]


ACK_POINTS = ("before-ack", "mid-ack")


def spark_arguments(master: str) -> dict[str, Any]:
    """The Spark arguments of an ingest on ``master``, as the cluster tests size them."""
    if master == LOCAL:
        return {}
    # In cluster mode one worker's core holds the driver (512 MB) and the other's the executor; in
    # client mode the application has an executor on each worker.
    sizing = {"driver_memory": "512m", "total_executor_cores": 1} if master == CLUSTER_MODE else {"total_executor_cores": 2}
    deploy_mode = "cluster" if master == CLUSTER_MODE else "client"
    return {**CLUSTER_SPARK, "deploy_mode": deploy_mode, "report_timeout_seconds": REPORT_TIMEOUT_SECONDS, **sizing}


def expected(master: str, point: str, kill: str) -> tuple[int, str | None]:
    """The crashing task's exit status, and the state of the batch the rerun settles (None: nothing).

    The task dies with spark-submit (-9), or fails of the job's death (1), except where Spark runs
    the task of a dead executor worker again on a cluster, and the run succeeds (0). The batch is
    left ``planned``, unless the job got to report it before anything died (at the operator's
    points), or, in cluster deploy mode, went on after spark-submit died and reported it then.
    """
    if kill == SUBMIT_AND_TASK:
        reported = point in ACK_POINTS or master == CLUSTER_MODE
        return -signal.SIGKILL, "committed" if reported else "planned"
    if kill == PYTHON_WORKER and master != LOCAL:
        return 0, None
    return 1, "planned"


@dataclass(frozen=True)
class CrashCell:
    """What a cell runs against: the broker, a catalog, a topic and the test's task processes."""

    service_url: str
    admin: PulsarAdmin
    catalog: Catalog
    topic: str
    tasks: IngestTasks

    def crash_then_rerun(self, master: str, kind: str, point: str, kill: str, cluster: StandaloneCluster | None = None) -> None:
        """Produce, crash a run at ``point`` killing ``kill``, rerun, check the table and the backlog."""
        target = LakehouseTable.of(kind, self.catalog, "crash_matrix")
        arguments = target.operator_arguments(self.catalog, self.topic, SUBSCRIPTION, **spark_arguments(master))
        # A plan log of the cell's own: one a failed cell left unfinished is no other cell's concern.
        arguments["plan_topic"] = f"persistent://public/default/{self.topic}-plans"
        self.admin.create_partitioned_topic(self.topic, 2)
        produce_json(self.service_url, self.topic, 0, MESSAGES, batch=100)
        status, settled = expected(master, point, kill)

        task = self.tasks.operator(arguments, point)
        assert crash(task, kill, cluster.worker_pids if cluster else ()) == status, task.log()[-4000:]
        if cluster is not None:
            cluster.wait_idle()

        rerun = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})

        assert rerun["skipped"] is True
        assert (rerun["settled"] or {}).get("was") == settled, rerun["settled"]
        assert_exactly_once(target.rows(), range(MESSAGES))
        assert self.admin.backlog(self.topic, SUBSCRIPTION).msg_backlog == 0
