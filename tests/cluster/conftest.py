"""The cluster tier: Apache Pulsar as a real cluster (ZooKeeper, three bookies, two brokers; see
jvm/pulsar_cluster.py), started once per test session.

Each module marks its tests ``cluster``. Under ``pytest -n N --dist loadgroup`` (``make test``) one
worker runs the whole tier (see ``pytest_xdist_make_scheduler`` in tests/conftest.py), so one
cluster is started, not one per worker.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jvm.pulsar_cluster import PulsarCluster

# Sets AIRFLOW_HOME and friends before anything imports airflow; Airflow then puts the plugins
# folder (the test DAGs' user functions) on the import path itself.
from tests.support.airflow_env import AIRFLOW_HOME
from tests.support.cluster_topics import create_namespace
from tests.support.keyed_stream import KeyedStream


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def pulsar_cluster(request: pytest.FixtureRequest) -> Iterator[PulsarCluster]:
    """The session's cluster; logs its start time and memory. Skipped under ``--brokers embedded``."""
    if request.config.getoption("--brokers") == "embedded":
        pytest.skip("the cluster tier runs Apache Pulsar only (--brokers embedded)")
    with tempfile.TemporaryDirectory(prefix="pulsar-cluster-") as work_dir:
        cluster = PulsarCluster(Path(work_dir)).start()
        rss = cluster.rss_bytes()
        print(
            f"\nApache Pulsar cluster ready in {cluster.startup_seconds:.1f} s, RSS "
            + ", ".join(f"{name} {size / 2**20:.0f} MiB" for name, size in rss.items()),
            file=sys.stderr,
        )
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def cluster(pulsar_cluster: PulsarCluster) -> PulsarCluster:
    """The session's cluster with every part up: what a test (or a failed one) left killed is started again."""
    pulsar_cluster.start_stopped()
    return pulsar_cluster


@pytest.fixture(scope="module")
def dedup_namespace(pulsar_cluster: PulsarCluster, request: pytest.FixtureRequest) -> str:
    """A namespace of the module's own, with broker deduplication on."""
    return create_namespace(pulsar_cluster, request.module.__name__.rsplit(".", 1)[-1], deduplication=True)


@pytest.fixture
def stream(cluster: PulsarCluster) -> Iterator[KeyedStream]:
    """Keyed streams through the cluster while a test breaks part of it; their clients close after the test."""
    streams = KeyedStream(cluster)
    try:
        yield streams
    finally:
        streams.close()


@pytest.fixture
def pulsar_default(cluster: PulsarCluster, monkeypatch: pytest.MonkeyPatch) -> PulsarCluster:
    """The default Airflow connection names both brokers; its admin URL is broker 0's."""
    conn = {"conn_type": "pulsar", "host": cluster.service_url, "extra": {"admin_url": cluster.web_url}}
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_DEFAULT", json.dumps(conn))
    # spark-submit is the one pip installed with pyspark into this environment, as on a worker.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    return cluster
