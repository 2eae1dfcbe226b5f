"""Shared fixtures: the standalone broker as a real child process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

READY = re.compile(r"ready: service_url=(\S+) web_service_url=(\S+)")


class BrokerProcess:
    """The standalone broker running as ``python -m airflow_pulsar.client.standalone``.

    After the first start it keeps its ports, so a restart (clean or after kill -9) comes back
    at the same URLs and clients reconnect to it.
    """

    def __init__(self, data_dir: Path, *extra_args: str):
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.port = 0
        self.http_port = 0
        self.process: subprocess.Popen[str] | None = None
        self.service_url = ""
        self.web_url = ""
        self.log_path = data_dir / "broker.log"

    def start(self) -> BrokerProcess:
        """Start and wait for the ready line."""
        args = [
            sys.executable, "-m", "airflow_pulsar.client.standalone",
            "--host", "127.0.0.1", "--port", str(self.port), "--http-port", str(self.http_port),
            "--data-dir", str(self.data_dir), *self.extra_args,
        ]
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "" if the broker exits instead
        match = READY.search(line)
        if match is None:
            self.process.kill()
            raise RuntimeError(f"broker did not start: {line!r}\n{self.log_path.read_text()}")
        self.service_url, self.web_url = match.group(1), match.group(2)
        self.port = int(self.service_url.rsplit(":", 1)[1])
        self.http_port = int(self.web_url.rsplit(":", 1)[1])
        return self

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=20)
        self.process = None
        return code

    def kill(self) -> None:
        """kill -9, as a crash."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)
            self.process = None

    def restart(self, crash: bool = False) -> BrokerProcess:
        """Stop (or kill -9) and start again on the same ports and data."""
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start()

    def admin(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        """One admin REST call, e.g. ``admin("GET", "/admin/v2/persistent/public/default")``."""
        return httpx.request(method, self.web_url + path, timeout=10, **kwargs)  # type: ignore[arg-type]

    def topic_stats(self, topic: str) -> dict:
        """The /stats document of a short topic name in public/default."""
        response = self.admin("GET", f"/admin/v2/persistent/public/default/{topic}/stats")
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    """A broker for the whole test module, with fsync on (the default)."""
    with tempfile.TemporaryDirectory(prefix="broker-") as data_dir:
        process = BrokerProcess(Path(data_dir)).start()
        try:
            yield process
        finally:
            process.stop()


@pytest.fixture
def broker_factory() -> Iterator:
    """Start brokers with extra options; each is stopped (by pid) after the test."""
    started: list[BrokerProcess] = []
    dirs: list[tempfile.TemporaryDirectory[str]] = []

    def make(*extra_args: str) -> BrokerProcess:
        tmp = tempfile.TemporaryDirectory(prefix="broker-")
        dirs.append(tmp)
        process = BrokerProcess(Path(tmp.name), *extra_args).start()
        started.append(process)
        return process

    yield make
    for process in started:
        if process.process is not None:
            process.kill()
    for tmp in dirs:
        tmp.cleanup()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    return re.sub(r"[^\w-]", "-", request.node.name)[:80] + f"-{time.monotonic_ns() % 1_000_000}"
