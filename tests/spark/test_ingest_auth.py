"""Each authentication method of the Pulsar connection reaches the ingest job, and no secret shows.

One TLS broker for the module takes tokens (checked with the test OAuth2 issuer's public key, so
that OAuth2 access tokens and a token issued beforehand both pass), basic passwords and client
certificates; a run of the operator with a connection of each ``auth_method`` ingests from it on
local Spark, and some on the module's standalone cluster in client and cluster deploy mode. While
a run goes on, the command line of every process below this one (spark-submit, the driver's JVM
and Python, the Python workers) and below the cluster's workers (executors, a cluster-mode driver)
is read again and again; after it, the Spark event log, the task log (what the operator and the
Spark provider's hook logged, with spark-submit's output), the driver's and executors' logs on the
workers and the broker's log are searched. None holds a secret: a token, a password, an OAuth2
client secret or access token, a private key.

The broker is our embedded one: this module checks what the Airflow side and the Spark job do with
credentials, which the broker only has to accept (the interop tier holds its authentication to
Apache Pulsar's).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_pulsar.client import AuthenticationBasic
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.spark.job.credentials import CREDENTIALS_FILE, PRIVATE_KEY_FILE, SHIPPED_FILES, TRUST_FILE
from jvm.spark_cluster import CLUSTER_SPARK, REPORT_TIMEOUT_SECONDS, StandaloneCluster
from tests.support.oauth2_issuer import TOKEN_PATH, Oauth2Issuer, RunningIssuer
from tests.support.process_watch import SeenProcesses, watch
from tests.support.security import Pki, SecuredBroker, every_method_broker
from tests.support.spark_ingest import (
    LOCAL_SPARK_CONF,
    SEVERAL_JOBS_TIMEOUT,
    VALUE_SCHEMA,
    Catalog,
    DagRuns,
    assert_exactly_once,
    produce_json,
)

pytestmark = [SEVERAL_JOBS_TIMEOUT]

USER, PASSWORD = "etl", "basic-password-Q7dfR2"
CLIENT_ID, CLIENT_SECRET = "airflow-etl", "oauth2-client-secret-Zx81Kw"
# The client the token of token authentication was issued to, beforehand.
TOKEN_CLIENT, TOKEN_CLIENT_SECRET = "token-holder", "token-holder-secret-Lp42Vn"
# A variable of the Airflow worker's environment that is none of the job's business.
WORKER_ONLY = "AIRFLOW_CONN_WAREHOUSE_DB"
MESSAGES = 600

# (Spark master, auth method): on local Spark token, basic and TLS (OAuth2 there is the guide's DAG,
# below); on the standalone cluster, TLS (the client certificate and key shipped to executors on
# the workers) and OAuth2 (a hosted Pulsar's) in both deploy modes, and the token in cluster mode,
# where it once went in the environment.
RUNS = [
    *(("local", method) for method in ("token", "basic", "tls")),
    ("standalone-client", "tls"),
    ("standalone-client", "oauth2"),
    ("standalone-cluster", "tls"),
    ("standalone-cluster", "oauth2"),
    ("standalone-cluster", "token"),
]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oauth2Issuer]:
    clients = {CLIENT_ID: CLIENT_SECRET, TOKEN_CLIENT: TOKEN_CLIENT_SECRET}
    with RunningIssuer(tmp_path_factory.mktemp("issuer"), clients) as running:
        yield running


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki, issuer: Oauth2Issuer) -> Iterator[SecuredBroker]:
    with every_method_broker(tmp_path_factory.mktemp("ingest-auth-broker"), pki, issuer.public_key_file, {USER: PASSWORD}) as running:
        yield running


@pytest.fixture(scope="module")
def static_token(issuer: Oauth2Issuer) -> str:
    """A token issued before the run, as an operator pastes one into a connection."""
    form = {"grant_type": "client_credentials", "client_id": TOKEN_CLIENT, "client_secret": TOKEN_CLIENT_SECRET}
    return str(httpx.post(issuer.url + TOKEN_PATH, data=form, timeout=10).json()["access_token"])


@dataclass(frozen=True)
class Method:
    """A connection's authentication fields, and the secrets they hold."""

    login: str | None
    password: str | None
    extra: dict[str, Any]
    secrets: tuple[str, ...]


def connection_method(method: str, pki: Pki, issuer: Oauth2Issuer, static_token: str, directory: Path) -> Method:
    key_lines = [line for line in pki.client_key.read_text().splitlines() if line and not line.startswith("-----")]
    if method == "token":
        return Method(None, static_token, {"auth_method": "token"}, (static_token, TOKEN_CLIENT_SECRET))
    if method == "basic":
        return Method(USER, PASSWORD, {"auth_method": "basic"}, (PASSWORD,))
    if method == "tls":
        files = {"tls_certificate_file_path": str(pki.client_cert), "tls_private_key_file_path": str(pki.client_key)}
        return Method(None, None, {"auth_method": "tls", **files}, tuple(key_lines))
    key_file = issuer.key_file(directory, CLIENT_ID)
    extra = {
        "auth_method": "oauth2",
        "oauth2_issuer_url": issuer.url,
        "oauth2_private_key": str(key_file),
        "oauth2_audience": "urn:pulsar:test",
    }
    return Method(None, None, extra, (CLIENT_SECRET,))


def spark_arguments(master: str, event_log: Path) -> dict[str, Any]:
    """The operator's Spark arguments on ``master``, with an uncompressed event log in ``event_log``."""
    logged = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_log.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }
    if master == "local":
        return {"conf": {**LOCAL_SPARK_CONF, **logged}}
    cluster = {**CLUSTER_SPARK, "conf": {**CLUSTER_SPARK["conf"], **logged}}
    if master == "standalone-client":
        return {**cluster, "total_executor_cores": 2}
    # A worker's core holds the driver, the other worker's the executor.
    return {
        **cluster,
        "deploy_mode": "cluster",
        "driver_memory": "512m",
        "total_executor_cores": 1,
        "report_timeout_seconds": REPORT_TIMEOUT_SECONDS,
    }


@pytest.fixture
def define_connection(monkeypatch: pytest.MonkeyPatch, secured: SecuredBroker, pki: Pki) -> Callable[[str, Method], None]:
    """Define the Pulsar connection ``conn_id`` to the module's broker with a method's fields; and
    a variable of the Airflow worker's environment that is none of the job's business."""

    def define(conn_id: str, fields: Method) -> None:
        extra = {"admin_url": secured.web_url, "tls_trust_certs_file_path": str(pki.ca), **fields.extra}
        connection = {
            "conn_type": "pulsar",
            "host": secured.service_url,
            "login": fields.login,
            "password": fields.password,
            "extra": extra,
        }
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))
        monkeypatch.setenv(WORKER_ONLY, "postgres://etl:warehouse-db-secret@db/warehouse")

    return define


@pytest.fixture
def ours(pki: Pki) -> dict[str, Any]:
    """The settings of the test's own clients: basic authentication, whatever the run's method."""
    return {"authentication": AuthenticationBasic(USER, PASSWORD), "tls_trust_certs_file_path": str(pki.ca)}


@pytest.mark.parametrize(("master", "method"), RUNS, ids=[f"{master}-{method}" for master, method in RUNS])
def test_each_auth_method_reaches_the_job_and_no_secret_shows(
    request: pytest.FixtureRequest,
    secured: SecuredBroker,
    pki: Pki,
    issuer: Oauth2Issuer,
    static_token: str,
    define_connection: Callable[[str, Method], None],
    ours: dict[str, Any],
    catalog: Catalog,
    topic_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    master: str,
    method: str,
) -> None:
    cluster: StandaloneCluster | None = request.getfixturevalue("spark_cluster") if master != "local" else None
    fields = connection_method(method, pki, issuer, static_token, tmp_path)
    define_connection("pulsar_default", fields)
    produce_json(secured.service_url, topic_name, 0, MESSAGES, batch=50, **ours)
    event_log = tmp_path / "events"
    event_log.mkdir()
    operator = PulsarToTableOperator(
        task_id="ingest",
        topics=topic_name,
        subscription=f"auth-{method}",
        table=f"by_{method}",
        value_format="json",
        value_schema=VALUE_SCHEMA,
        min_partitions=2,
        **spark_arguments(master, event_log),
        **catalog.operator_args(),
    )
    caplog.set_level(logging.INFO)
    roots = [os.getpid(), *(cluster.worker_pids if cluster else [])]
    apps_before = len(cluster.completed("apps")) if cluster else 0

    with watch(lambda: roots) as seen:
        result = operator.execute(context={})

    assert result["total_rows"] == MESSAGES
    assert_exactly_once(catalog.rows(f"by_{method}"), range(MESSAGES))
    with PulsarAdmin(secured.web_url, authentication=ours["authentication"], tls_trust_certs_file_path=str(pki.ca)) as admin:
        assert admin.backlog(topic_name, f"auth-{method}").msg_backlog == 0
    secrets = [*fields.secrets, *(token.token for token in issuer.issued if token.client_id == CLIENT_ID)]
    # Airflow's logging writes the task's lines (the operator's, the hook's and spark-submit's) to stdout.
    task_log = caplog.text + "".join(capfd.readouterr())
    assert_the_job_ran_where_expected(seen, master, sys.executable)
    assert_no_secret_shows(seen, secrets, task_log, event_log, secured, method)
    if cluster is not None:
        apps = [app["id"] for app in cluster.completed("apps")[apps_before:]]
        assert_what_the_cluster_holds(cluster, apps, seen, secrets, method)
        for name, text in worker_logs(cluster).items():
            assert not [secret for secret in secrets if secret in text], f"a secret in {name}"


@pytest.mark.parametrize("method", ["oauth2", "token", "basic", "tls"])
def test_the_guide_s_dag_ingests_with_each_auth_method(
    method: str,
    static_token: str,
    spark_test_dags: Any,
    secured: SecuredBroker,
    pki: Pki,
    issuer: Oauth2Issuer,
    define_connection: Callable[[str, Method], None],
    ours: dict[str, Any],
    catalog: Catalog,
    topic_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The example DAG of the security page (tests/spark/dags/pulsar_hosted_to_table_dag.py), on
    local Spark, with its connection pointed at the module's broker: as the page shows it (OAuth2,
    with the module's issuer), and with each other method in its place."""
    from tests.spark.dags.pulsar_hosted_to_table_dag import HOSTED_PULSAR

    if method == "oauth2":
        hosted = dict(HOSTED_PULSAR["extra"])  # type: ignore[arg-type]
        hosted.update(oauth2_issuer_url=issuer.url, oauth2_private_key=str(issuer.key_file(tmp_path, CLIENT_ID)))
        del hosted["admin_url"], hosted["tls_trust_certs_file_path"]  # the module's broker's
        fields = Method(None, None, hosted, (CLIENT_SECRET,))
    else:
        fields = connection_method(method, pki, issuer, static_token, tmp_path)
    define_connection("pulsar_hosted", fields)
    produce_json(secured.service_url, topic_name, 0, MESSAGES, batch=50, **ours)
    event_log = tmp_path / "events"
    event_log.mkdir()
    conf = {"topic": topic_name, "event_log": event_log.as_uri(), **{k: str(v) for k, v in vars(catalog).items()}}
    caplog.set_level(logging.INFO)

    with watch(lambda: [os.getpid()]) as seen:
        xcoms = DagRuns(spark_test_dags.get_dag("pulsar_hosted_to_table"), conf).run()

    assert xcoms["ingest"]["total_rows"] == MESSAGES
    assert_exactly_once(catalog.rows("hosted_events"), range(MESSAGES))
    secrets = [*fields.secrets, *(token.token for token in issuer.issued if token.client_id == CLIENT_ID)]
    task_log = caplog.text + "".join(capfd.readouterr())
    assert_the_job_ran_where_expected(seen, "local", sys.executable)
    assert_no_secret_shows(seen, secrets, task_log, event_log, secured, method)


def assert_no_secret_shows(
    seen: SeenProcesses, secrets: list[str], task_log: str, event_log: Path, secured: SecuredBroker, method: str
) -> None:
    """No secret on a command line of the processes seen, in the task log, the Spark event log or the broker's log."""
    for secret in secrets:
        assert not seen.commands_with(secret), f"a secret on the command line of {seen.commands_with(secret)}"
    # The files went with --files, by their paths.
    assert "Spark-Submit cmd" in task_log and TRUST_FILE in task_log
    assert (PRIVATE_KEY_FILE if method == "tls" else CREDENTIALS_FILE) in task_log
    # One application's log: a file, or a directory of files when it rolls.
    assert len(list(event_log.iterdir())) == 1
    events = "".join(path.read_text() for path in sorted(event_log.rglob("*")) if path.is_file())
    assert "SparkListenerEnvironmentUpdate" in events and TRUST_FILE in events
    texts = {"task log": task_log, "event log": events, "broker log": secured.process.log_path.read_text()}
    for name, text in texts.items():
        assert not [secret for secret in secrets if secret in text], f"a secret in the {name}"


def assert_the_job_ran_where_expected(seen: SeenProcesses, master: str, python: str) -> None:
    """The watch saw the processes whose command lines matter, so that finding no secret on them means something."""
    assert seen.running("org.apache.spark.deploy.SparkSubmit"), "spark-submit's JVM was not seen"
    if master == "standalone-cluster":
        assert seen.running("org.apache.spark.deploy.worker.DriverWrapper"), "the driver's JVM on a worker was not seen"
    else:
        assert [process for process in seen.running("__main__.py") if process.python], "the job's Python driver was not seen"
    if master != "local":
        assert seen.running("org.apache.spark.executor.CoarseGrainedExecutorBackend"), "no executor JVM was seen"
    assert [process for process in seen.running("pyspark.daemon") if process.command[0] == python], "no Python worker was seen"


def worker_logs(cluster: StandaloneCluster) -> dict[str, str]:
    """The drivers' and executors' stdout and stderr on the workers."""
    logs = {}
    for path in (cluster.directory / "work").glob("worker-*/*/**/std*"):
        if path.is_file():
            logs[str(path.relative_to(cluster.directory))] = path.read_text(errors="replace")
    assert logs, "no driver or executor log on the workers"
    return logs


def assert_what_the_cluster_holds(
    cluster: StandaloneCluster, apps: list[str], seen: SeenProcesses, secrets: list[str], method: str
) -> None:
    """The cluster's processes got only what the job needs in their environment, and the executors
    of ``apps`` the files shipped with the job, the copies holding a secret readable by their owner only."""
    on_cluster = [
        process for process in seen.processes.values() if process.runs("org.apache.spark.executor") or process.runs("DriverWrapper")
    ]
    assert on_cluster
    for process in on_cluster:
        environment = seen.environment(process)
        assert environment, f"the environment of {process} was not read"
        assert WORKER_ONLY not in environment, f"the Airflow worker's environment reached {process}"
        assert not [secret for secret in secrets if secret in json.dumps(environment)], f"a secret in the environment of {process}"
    assert len(apps) == 1
    copies = [path for path in (cluster.directory / "work").glob(f"worker-*/{apps[0]}/*/airflow-pulsar-*") if path.name in SHIPPED_FILES]
    assert TRUST_FILE in {path.name for path in copies}
    assert (CREDENTIALS_FILE if method != "tls" else PRIVATE_KEY_FILE) in {path.name for path in copies}
    for path in copies:
        if path.name in (CREDENTIALS_FILE, PRIVATE_KEY_FILE):
            assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others: {oct(path.stat().st_mode)}"
