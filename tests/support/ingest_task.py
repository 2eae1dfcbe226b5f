"""An ingest task in a process of its own, as an Airflow worker runs one, held at a crash point so
that a test can kill a process of the run there for real (airflow_pulsar.spark.job.faults).

The task process runs ``PulsarToTableOperator(**arguments).execute()``, or a DAG run
(``dag.test()``, whose tasks run in the process), in a session of its own: every process it
starts (spark-submit, the driver's JVM and Python, the executors' Python workers) stays in that
session, so the test finds them, and cleans up after them, by pid. In cluster deploy mode the
driver and executors run under the cluster's workers instead (``extra_roots``).

The kinds of process a test kills at a point (:data:`KILLS`): the driver's JVM (in client mode
and on local Spark, spark-submit's own JVM; in cluster deploy mode, the one the worker started);
the executor's Python worker that holds; spark-submit together with the task process (at the
operator's points spark-submit has ended: the task process). :data:`KILLABLE` says which of them
a death at each point can be: no executor runs before the job's session starts or after its write.

Run as ``python -m tests.support.ingest_task REQUEST``: the request is a JSON file with
``operator`` (the operator's arguments) or ``dag`` (``folder``, ``dag_id``, ``conf``); the
operator's return value goes to ``result.json`` beside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_pulsar.spark.job.faults import FAULT_ENV, HOLD_DIR_ENV
from tests.support.process_tree import Process, descendants, in_session, signal_all, wait_gone

CHECKOUT = Path(__file__).resolve().parents[2]

DRIVER_JVM = "driver-jvm"
PYTHON_WORKER = "python-worker"
SUBMIT_AND_TASK = "submit-and-task"
KILLS = (DRIVER_JVM, PYTHON_WORKER, SUBMIT_AND_TASK)
KILLABLE = {
    "before-write": (DRIVER_JVM, SUBMIT_AND_TASK),
    "mid-read": (DRIVER_JVM, PYTHON_WORKER, SUBMIT_AND_TASK),
    "after-write": (DRIVER_JVM, SUBMIT_AND_TASK),
    "before-ack": (SUBMIT_AND_TASK,),
    "mid-ack": (SUBMIT_AND_TASK,),
}
# The longest a run may take to reach its crash point, and its processes to end after a death.
HOLD_TIMEOUT_SECONDS = 300
END_TIMEOUT_SECONDS = 240


@dataclass(frozen=True)
class Held:
    """The process holding at a crash point, as it announced itself."""

    point: str
    pid: int
    parent: int


class IngestTask:
    """A task process running an ingest, with its crash point directory (``directory``)."""

    def __init__(self, directory: Path, request: dict[str, Any], point: str | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.point = point
        request_file = directory / "request.json"
        request_file.write_text(json.dumps(request))
        environment = {key: value for key, value in os.environ.items() if key not in (FAULT_ENV, HOLD_DIR_ENV)}
        if point is not None:
            environment.update({FAULT_ENV: point, HOLD_DIR_ENV: str(directory)})
        self.log_path = directory / "task.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.ingest_task", str(request_file)],
                stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=CHECKOUT, start_new_session=True,
            )  # fmt: skip
        self._session: list[Process] = []

    @classmethod
    def operator(cls, directory: Path, arguments: dict[str, Any], point: str | None = None) -> IngestTask:
        """``PulsarToTableOperator(task_id="ingest", **arguments).execute()`` in a task process."""
        return cls(directory, {"operator": arguments}, point)

    @classmethod
    def dag_run(cls, directory: Path, folder: Path, dag_id: str, conf: dict[str, Any], point: str | None = None) -> IngestTask:
        """A run of DAG ``dag_id`` of ``folder`` with ``conf``, its tasks in a task process."""
        return cls(directory, {"dag": {"folder": str(folder), "dag_id": dag_id, "conf": conf}}, point)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def held(self, timeout_seconds: float = HOLD_TIMEOUT_SECONDS) -> Held:
        """Wait until a process of the run holds at the task's crash point."""
        assert self.point is not None
        marker = self.directory / f"{self.point}.held"
        deadline = time.monotonic() + timeout_seconds
        while not marker.exists():
            status = self.process.poll()
            assert status is None, f"the task ended ({status}) before holding at {self.point}:\n{self.log()[-4000:]}"
            assert time.monotonic() < deadline, f"the task did not hold at {self.point} within {timeout_seconds:g} s:\n{self.log()[-4000:]}"
            time.sleep(0.1)
        announced = json.loads(marker.read_text())
        return Held(announced["point"], announced["pid"], announced["parent"])

    def release(self) -> None:
        """Let the process holding at the crash point go on."""
        assert self.point is not None
        (self.directory / f"{self.point}.release").touch()

    def processes(self) -> list[Process]:
        """The task process and every process of its session now (remembered, to clean up after)."""
        found = in_session(self.pid)
        self._session += found
        return found

    def wait(self, timeout_seconds: float = HOLD_TIMEOUT_SECONDS) -> int:
        """The task process's exit status once it ended (negative: the signal that killed it)."""
        try:
            return self.process.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the task did not end within {timeout_seconds:g} s:\n{self.log()[-4000:]}") from None

    def result(self) -> dict[str, Any]:
        """The operator's return value, after the task succeeded."""
        return json.loads((self.directory / "result.json").read_text())

    def clean_up(self) -> None:
        """Kill whatever is left of the task's processes."""
        leftover = [*self._session, *in_session(self.pid)]
        signal_all(leftover, signal.SIGKILL)
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(30)


class IngestTasks:
    """The task processes of a test, each with a directory of its own under ``directory``; whatever
    is left of them is killed by :meth:`clean_up`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[IngestTask] = []

    def _next(self) -> Path:
        return self.directory / f"task-{len(self.started) + 1}"

    def operator(self, arguments: dict[str, Any], point: str | None = None) -> IngestTask:
        self.started.append(IngestTask.operator(self._next(), arguments, point))
        return self.started[-1]

    def dag_run(self, folder: Path, dag_id: str, conf: dict[str, Any], point: str | None = None) -> IngestTask:
        self.started.append(IngestTask.dag_run(self._next(), folder, dag_id, conf, point))
        return self.started[-1]

    def clean_up(self) -> None:
        for task in self.started:
            task.clean_up()


def victims(task: IngestTask, held: Held, kill: str, running: Sequence[Process]) -> list[Process]:
    """The processes of kind ``kill`` among ``running``, those of the run holding at ``held``."""
    assert kill in KILLABLE[held.point], f"no {kill} runs at {held.point}"
    if kill == PYTHON_WORKER:
        return [process for process in running if process.pid == held.pid]
    if kill == SUBMIT_AND_TASK:
        submit = [process for process in running if process.parent == task.pid and process.runs("org.apache.spark.deploy.SparkSubmit")]
        return [*submit, *(process for process in running if process.pid == task.pid)]
    drivers = [process for process in running if process.python and process.runs("--spec")]
    assert len(drivers) == 1, f"the job's Python driver among {[str(p) for p in running]}"
    jvm = Process.read(drivers[0].parent)
    assert jvm is not None and jvm.java, f"the driver's JVM, parent of {drivers[0]}"
    return [jvm]


def crash(task: IngestTask, kill: str, extra_roots: Sequence[int] = ()) -> int:
    """Kill the processes of kind ``kill`` while the task holds at its crash point, and let the rest
    of the run go on as it would: the task's exit status once every process of the run it had then
    has ended (-9: the task was killed). ``extra_roots``: where else the run's processes are (the
    workers of a standalone cluster, for a driver in cluster deploy mode)."""
    held = task.held()
    run = [*task.processes(), *descendants(extra_roots)]
    killed = victims(task, held, kill, run)
    signal_all(killed, signal.SIGKILL)
    # Released only once they are gone: a JVM takes a while to die, and a process holding below it
    # would otherwise go on as if its parent were alive.
    assert not wait_gone(killed, END_TIMEOUT_SECONDS), f"still running after SIGKILL: {[str(p) for p in killed]}"
    task.release()
    status = task.wait()
    left = wait_gone(run, END_TIMEOUT_SECONDS)
    assert not left, f"after the {kill} died at {held.point}, still running: {[str(p) for p in left]}"
    return status


def _run(request: dict[str, Any], result_file: Path) -> int:
    if "operator" in request:
        from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

        result = PulsarToTableOperator(task_id="ingest", **request["operator"]).execute(context={})
        result_file.write_text(json.dumps(result))
        return 0
    from airflow.dag_processing.dagbag import DagBag

    dag = request["dag"]
    run = DagBag(dag_folder=dag["folder"]).get_dag(dag["dag_id"]).test(run_conf=dag["conf"])
    return 0 if str(run.state) == "success" else 1


if __name__ == "__main__":
    request_path = Path(sys.argv[1])
    sys.exit(_run(json.loads(request_path.read_text()), request_path.with_name("result.json")))
