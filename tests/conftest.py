"""Shared fixtures: the brokers under test, as real child processes.

Every broker-backed test runs against both brokers through the module-scoped ``broker`` fixture:
``embedded`` (our standalone broker, a fresh one per module) and ``pulsar`` (Apache Pulsar
standalone from Maven Central, one per test process for the whole session, because a JVM takes
seconds to start). ``--brokers embedded|pulsar|both`` picks them. A test that exercises our broker's
own internals, or a newcomer's first runs on the embedded default whose DAGs the deployment tier
runs on Apache Pulsar, is marked ``embedded_only`` and says in its docstring why. A tier whose subject is not
the broker (Spark's cluster deploy modes, Airflow's separate processes) is marked ``one_broker``: it
runs on Apache Pulsar when selected, else on the embedded broker, since what it checks is the same
on either and the tiers that run on both already hold the brokers to one behaviour.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from hypothesis import settings

from airflow_pulsar.broker.process import BrokerProcess
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone
from jvm.spark_cds import QUICK_JVM_OPTIONS
from tests.support.security import Pki, SecuredBroker, make_pki, secured_broker

# Every spark-submit of the session starts its JVM (in client mode, the driver) with the quick
# options, in this process and in those the tests start (Airflow's components, the demo).
os.environ.setdefault("SPARK_SUBMIT_OPTS", QUICK_JVM_OPTIONS)

BROKER_KINDS = ("embedded", "pulsar")

# Property tests check what a codec or a state machine does, not how fast: no per-example deadline,
# which a loaded machine (the suite's two workers beside CI's environment builds) overruns.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


class Broker(Protocol):
    """What a test may use of the broker under test, whichever it is."""

    name: str
    service_url: str
    web_url: str
    port: int
    http_port: int
    log_path: Path

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...
    def topic_stats(self, topic: str) -> dict[str, Any]: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--brokers", choices=("embedded", "pulsar", "both"), default="both",
        help="which brokers the broker-backed tests run against (default: both)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "embedded_only: our broker's internals, or what a newcomer runs on it; runs against the embedded broker only"
    )
    config.addinivalue_line(
        "markers", "one_broker: not about the broker; runs on Apache Pulsar if selected, else on the embedded broker"
    )
    config.addinivalue_line(
        "markers", "cluster: runs against an Apache Pulsar cluster (ZooKeeper, three bookies, two brokers), one a session"
    )


CLUSTER_TIER = "tests/cluster/"


# A broker kind in a test id's parameters, e.g. "[pulsar-deferred]": pytest_generate_tests
# parametrizes it first, so it leads the id. Elsewhere it is part of another parameter, as in
# "[topics-admin-url-is-pulsar]", whose module would otherwise be split and set up twice.
_KIND_IN_ID = re.compile(r"\[(embedded|pulsar)[\]-]")


def worker_scope(nodeid: str) -> str:
    """What one xdist worker runs as a whole: a module with one broker kind, so its module-scoped
    fixtures (a broker, a Spark job, an Airflow deployment, a restarted Pulsar) start once and not
    on each worker; and the whole cluster tier, so one cluster starts."""
    if nodeid.startswith(CLUSTER_TIER):
        return CLUSTER_TIER
    module, _, rest = nodeid.partition("::")
    kind = _KIND_IN_ID.search(rest)
    return f"{module}[{kind.group(1)}]" if kind else module


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown when xdist is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup`` (``make test``), tests go to workers by :func:`worker_scope`, in
    collection order (``testpaths`` lists the slow tiers first, so the two workers share them and
    the many quick unit modules fill in at the end; ``--no-loadscope-reorder`` keeps that order).

    Grouped by path, because ``xdist_group`` marks do not group with pytest 9 (pytest-xdist 3.8
    applies them by renaming node ids, which pytest 9 no longer reads).
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkerScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_scope(nodeid)

    return ByWorkerScope(config, log)


def selected_kinds(config: pytest.Config) -> list[str]:
    choice = config.getoption("--brokers")
    return list(BROKER_KINDS) if choice == "both" else [choice]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses ``broker`` once per selected broker, grouped by module."""
    if "broker_kind" not in metafunc.fixturenames:
        return
    kinds = selected_kinds(metafunc.config)
    if metafunc.definition.get_closest_marker("embedded_only") is not None:
        kinds = [kind for kind in kinds if kind == "embedded"]
    elif metafunc.definition.get_closest_marker("one_broker") is not None:
        kinds = ["pulsar"] if "pulsar" in kinds else kinds[:1]
    metafunc.parametrize("broker_kind", kinds, scope="module")


@pytest.fixture(scope="module")
def broker_kind(request: pytest.FixtureRequest) -> str:
    """``embedded`` or ``pulsar``: which broker this module's tests run against."""
    return str(request.param)


@pytest.fixture(scope="session")
def apache_pulsar() -> Iterator[PulsarStandalone]:
    """Apache Pulsar standalone, shared by every module of this test process."""
    with tempfile.TemporaryDirectory(prefix="apache-pulsar-") as work_dir:
        pulsar = PulsarStandalone(Path(work_dir), jvm_options=QUICK_JIT).start()
        try:
            yield pulsar
        finally:
            pulsar.stop()


TRANSACTION_COORDINATORS = 2


@pytest.fixture(scope="session")
def apache_pulsar_transactions() -> Iterator[PulsarStandalone]:
    """Apache Pulsar standalone with transactions on and two coordinators, shared by every module of
    this test process that needs a coordinator. Not the session's ``apache_pulsar``: a broker with
    transactions loads a transaction buffer with every topic and writes its snapshots to system topics
    of the topic's namespace, which the other tests would then see and wait for."""
    with tempfile.TemporaryDirectory(prefix="apache-pulsar-txn-") as work_dir:
        pulsar = PulsarStandalone(Path(work_dir), jvm_options=QUICK_JIT, transaction_coordinators=TRANSACTION_COORDINATORS).start()
        try:
            yield pulsar
        finally:
            pulsar.stop()


@pytest.fixture(scope="module")
def transaction_broker(broker_kind: str, request: pytest.FixtureRequest) -> Iterator[Broker]:
    """The broker under test for transactions, with ``TRANSACTION_COORDINATORS`` coordinators: a fresh
    embedded one per module (``--transaction-coordinators``), or the session's Apache Pulsar with them."""
    if broker_kind == "pulsar":
        pulsar: PulsarStandalone = request.getfixturevalue("apache_pulsar_transactions")
        if not pulsar.running:
            pulsar.start()
        yield pulsar
        return
    with tempfile.TemporaryDirectory(prefix="broker-txn-") as data_dir:
        process = BrokerProcess(Path(data_dir), "--transaction-coordinators", str(TRANSACTION_COORDINATORS)).start()
        try:
            yield process
        finally:
            process.stop()


@pytest.fixture(scope="module")
def broker(broker_kind: str, request: pytest.FixtureRequest) -> Iterator[Broker]:
    """The broker under test for the whole module: a fresh embedded one (fsync on, the default),
    or the session's Apache Pulsar."""
    if broker_kind == "pulsar":
        pulsar: PulsarStandalone = request.getfixturevalue("apache_pulsar")
        if not pulsar.running:  # a test that stopped it failed before starting it again
            pulsar.start()
        yield pulsar
        return
    with tempfile.TemporaryDirectory(prefix="broker-") as data_dir:
        process = BrokerProcess(Path(data_dir)).start()
        try:
            yield process
        finally:
            process.stop()


@pytest.fixture
def broker_factory() -> Iterator:
    """Start embedded brokers with extra options; each is stopped (by pid) after the test."""
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


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Airflow's metadata database (SQLite in AIRFLOW_HOME), created once per test process, for dag.test().

    For the tiers that run Airflow in this process (tests/airflow, tests/spark, tests/cluster): each
    sets the Airflow environment in its conftest.py (``tests.support.airflow_env``) before airflow is imported,
    so each xdist worker has a home of its own.
    """
    from airflow.utils.db import initdb

    initdb()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (and to the broker it runs against)."""
    return re.sub(r"[^\w-]", "-", request.node.name)[:80] + f"-{time.monotonic_ns() % 1_000_000_000}"


# ---- secured brokers: token authentication and TLS (tests/integration, tests/interop, tests/airflow) ----


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A test CA and the server certificates it signed (see ``tests.support.security.make_pki``), fresh per module."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """An embedded broker for the module that requires a token signed with its secret key; plain transport."""
    with secured_broker(tmp_path_factory.mktemp("token-broker"), tokens=True) as broker:
        yield broker


@pytest.fixture(scope="module")
def tls_token_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredBroker]:
    """An embedded broker for the module with TLS (``pki``'s server certificate) and tokens together,
    as a production broker would run."""
    with secured_broker(tmp_path_factory.mktemp("tls-token-broker"), tokens=True, pki=pki) as broker:
        yield broker


@pytest.fixture(scope="module")
def wrong_host_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredBroker]:
    """An embedded TLS broker whose certificate, signed by ``pki``'s CA, names another host."""
    with secured_broker(tmp_path_factory.mktemp("wrong-host-broker"), pki=pki, wrong_host=True) as broker:
        yield broker
