"""The ``airflow-pulsar`` command run as a user runs it: a process of its own, pointed at a broker
through the environment variables the command reads."""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_pulsar.broker.process import BrokerProcess


def run(broker: BrokerProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``airflow-pulsar ARGS`` on ``broker`` (its service and admin URLs), output captured as text."""
    env = {**os.environ, "PULSAR_SERVICE_URL": broker.service_url, "PULSAR_ADMIN_URL": broker.web_url}
    return subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.cli", *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )
