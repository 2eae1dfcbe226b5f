"""An Airflow deployment's processes and a REST client on its api-server (the ``deployment``
fixture of tests/deployment/conftest.py starts one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.polling import wait_until

AIRFLOW = Path(sys.executable).with_name("airflow")
COMPONENTS = {
    "scheduler": ["scheduler"],
    "triggerer": ["triggerer"],
    "dag-processor": ["dag-processor"],
    "api-server": ["api-server", "--host", "127.0.0.1", "--port", "{port}"],
}
# How often the tests ask the api-server while they wait: each request costs it tens of ms of CPU
# (a 20-per-second poll kept a third of a core busy), and the scheduler acts in seconds.
POLL_SECONDS = 1.0
# The components the api-server's health endpoint reports on, by their names there.
HEALTH = ("metadatabase", "scheduler", "triggerer", "dag_processor")


def poll_api(condition: Callable[[], Any], what: str, timeout: float) -> Any:
    """``wait_until`` for a condition that asks the api-server, once every :data:`POLL_SECONDS`."""
    return wait_until(condition, what, timeout, POLL_SECONDS)


class AirflowDeployment:
    """The running components and a REST client on the api-server."""

    def __init__(self, home: Path, env: dict[str, str], port: int, password: str) -> None:
        self.home = home
        self.env = env
        self.api_url = f"http://127.0.0.1:{port}"
        self._port = port
        self._password = password
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._http = httpx.Client(base_url=self.api_url, timeout=30)

    # ---- lifecycle ----

    def start(self) -> AirflowDeployment:
        migrated = subprocess.run([AIRFLOW, "db", "migrate"], env=self.env, capture_output=True, text=True, timeout=300)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        (self.home / "logs").mkdir(exist_ok=True)
        for name in COMPONENTS:
            self._spawn(name, "wb")
        poll_api(self._healthy, "scheduler, triggerer, dag-processor and api-server to report healthy", 240)
        response = self._http.post("/auth/token", json={"username": "tester", "password": self._password})
        assert response.status_code == 201, response.text
        self._http.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
        return self

    def _spawn(self, name: str, log_mode: str) -> None:
        args = COMPONENTS[name]
        with self.log_path(name).open(log_mode) as output:
            self.processes[name] = subprocess.Popen(
                [AIRFLOW, *(arg.format(port=self._port) for arg in args)],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                # Its own process group: the LocalExecutor's workers and the api-server's
                # children stop with it.
                start_new_session=True,
            )

    def stop_component(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop one component (SIGKILL: as a crash would), with what it started."""
        process = self.processes[name]
        _signal_group(process, sig)
        try:
            process.wait(timeout=60)
        finally:
            _signal_group(process, signal.SIGKILL)

    def start_component(self, name: str) -> None:
        """Start a stopped component again (its log goes on in the same file); wait until it reports healthy."""
        self._spawn(name, "ab")
        poll_api(self._healthy, f"{name} to report healthy again", 240)

    def _healthy(self) -> bool:
        for name, process in self.processes.items():
            if process.poll() is not None:
                pytest.fail(f"airflow {name} exited with {process.returncode}:\n{self.log_tail(name)}")
        try:
            health = self._http.get("/api/v2/monitor/health").json()
        except (httpx.HTTPError, ValueError):
            return False
        return all((health.get(part) or {}).get("status") == "healthy" for part in HEALTH)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every component, then SIGKILL what is left after ``grace`` seconds in all
        (nothing of a test deployment is worth a slow graceful shutdown)."""
        self._http.close()
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes.values():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)  # the process if still there, and what is left of its group
            process.wait(timeout=30)

    def log_path(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.out"

    def log_tail(self, name: str, chars: int = 4000) -> str:
        return self.log_path(name).read_text(errors="replace")[-chars:]

    # ---- REST ----

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call ``/api/v2{path}``; the JSON answer, or a test failure naming the status (and the
        api-server's log when it did not answer)."""
        # A read is retried on a transient server error and on no answer in time: Airflow 3.3's
        # asset events endpoint answers 500 while a run it created is still queued (no start_date
        # to validate yet), and on a loaded machine a request can wait out the api-server's pool
        # of SQLite connections (30 s) while the scheduler and the tasks write.
        attempts = 10 if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(method, f"/api/v2{path}", **kwargs)
            except httpx.TimeoutException as exc:
                if attempt == attempts:
                    pytest.fail(f"{method} {path}: no answer ({exc!r})\n{self.log_tail('api-server')}")
                continue
            if response.status_code < 500 or attempt == attempts:
                break
            time.sleep(1)
        if response.status_code >= 400:
            pytest.fail(f"{method} {path}: {response.status_code} {response.text[:2000]}\n{self.log_tail('api-server')}")
        return response.json() if response.content else None

    def parsed(self, dag_id: str) -> dict[str, Any]:
        """The DAG once the dag-processor has parsed it (and found no import error)."""

        def found() -> dict[str, Any] | None:
            errors = self.api("GET", "/importErrors")["import_errors"]
            assert errors == [], errors
            try:
                response = self._http.get(f"/api/v2/dags/{dag_id}")
            except httpx.TimeoutException:
                return None
            return response.json() if response.status_code == 200 else None

        return poll_api(found, f"the dag-processor to parse {dag_id}", 180)

    def unpause(self, dag_id: str) -> None:
        self.parsed(dag_id)
        assert self.api("PATCH", f"/dags/{dag_id}", json={"is_paused": False})["is_paused"] is False

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Start a run now, as ``POST dagRuns`` does for a user; its run id."""
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}})
        return str(run["dag_run_id"])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "run_after", "limit": 100})["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        instances = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in instances}

    def finished(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        """Wait for the run to end; fail with its task states and the scheduler's log unless it succeeded."""

        def ended() -> dict[str, Any] | None:
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            return run if run["state"] in ("success", "failed") else None

        try:
            run = wait_until(ended, f"{dag_id} run {run_id} to finish", timeout, interval=2.0)
        except pytest.fail.Exception as timed_out:
            pytest.fail(f"{timed_out}: {self.task_states(dag_id, run_id)}\n{self.log_tail('scheduler')}")
        if run["state"] != "success":
            pytest.fail(
                f"{dag_id} run {run_id} {run['state']}: {self.task_states(dag_id, run_id)}\n"
                f"{self.task_log(dag_id, run_id)}\n{self.log_tail('scheduler')}"
            )
        return run

    def task_log(self, dag_id: str, run_id: str) -> str:
        """The logs of the run's failed tasks (first try of each), for failure messages."""
        texts = []
        for task_id, state in self.task_states(dag_id, run_id).items():
            if state in ("failed", "upstream_failed"):
                path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1"
                # This API answers JSON only (a text/plain request is refused with 406).
                texts.append(f"--- {task_id}\n{self._http.get(path, headers={'Accept': 'application/json'}).text[-3000:]}")
        return "\n".join(texts)

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        return self.api("GET", path, params={"deserialize": True})["value"]

    def queued_asset_events(self, dag_id: str) -> int:
        """How many of the DAG's assets have an event waiting for the scheduler to make a run of it."""
        return self.api("GET", f"/dags/{dag_id}/assets/queuedEvents")["total_entries"]

    def asset_events(self, asset_name: str) -> list[dict[str, Any]]:
        assets = self.api("GET", "/assets", params={"name_pattern": asset_name})["assets"]
        (asset,) = [asset for asset in assets if asset["name"] == asset_name]
        events = self.api("GET", "/assets/events", params={"asset_id": asset["id"], "limit": 1000})
        return events["asset_events"]


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
