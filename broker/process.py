"""Run the standalone broker as a child process: for tests, benchmarks and the demo.

The process is started with ``python -m airflow_pulsar.broker`` and found ready by its
ready line. After the first start it keeps its ports, so a restart (clean or after kill -9) comes
back at the same URLs and clients reconnect to it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

READY = re.compile(r"ready: service_url=(\S+) web_service_url=(\S+)")


class BrokerProcess:
    """One standalone broker child process and its URLs."""

    name = "embedded"

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
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        args = [
            sys.executable, "-m", "airflow_pulsar.broker",
            "--host", "127.0.0.1", "--port", str(self.port), "--http-port", str(self.http_port),
            "--data-dir", str(self.data_dir), *self.extra_args,
        ]
        # The child keeps its own copy of the descriptor; the log stays private as the data dir is.
        with open(os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a") as log:
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

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One admin REST call, e.g. ``admin("GET", "/admin/v2/persistent/public/default")``."""
        return httpx.request(method, self.web_url + path, timeout=10, **kwargs)

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """The /stats document of a short topic name in public/default."""
        response = self.admin("GET", f"/admin/v2/persistent/public/default/{topic}/stats")
        response.raise_for_status()
        return response.json()
