"""Shared fixtures: the standalone broker as a real child process."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.client.standalone.process import BrokerProcess


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
