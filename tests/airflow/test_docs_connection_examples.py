"""The connections the docs define on the command line (docs/examples/connection, security/ and
spark/), sourced or run with bash as shown: what Airflow and the hook make of each."""

from __future__ import annotations

import pytest

from airflow_pulsar.hooks.pulsar import PulsarHook
from tests.support.doc_scripts import EXAMPLES, run_script, sourced_variable


def define_from(script: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set ``name`` in this process as ``source script`` sets it in a shell."""
    monkeypatch.setenv(name, sourced_variable(EXAMPLES / script, name))


def test_the_local_broker_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    define_from("connection/local_broker.sh", "AIRFLOW_CONN_PULSAR_DEFAULT", monkeypatch)
    config = PulsarHook().config
    assert (config.service_url, config.admin_url, config.token) == ("pulsar://127.0.0.1:6650", "http://127.0.0.1:8080", None)


def test_the_real_cluster_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import BaseHook

    define_from("connection/real_clusters.sh", "AIRFLOW_CONN_PULSAR_DEFAULT", monkeypatch)
    define_from("connection/real_clusters.sh", "AIRFLOW_CONN_SPARK_DEFAULT", monkeypatch)
    config = PulsarHook().config
    assert (config.service_url, config.admin_url) == ("pulsar+ssl://pulsar.example.com:6651", "https://pulsar.example.com:8443")
    assert (config.token, config.use_tls, config.tls_trust_certs_file_path) == ("<jwt>", True, "/etc/pulsar/ca.pem")
    spark = BaseHook.get_connection("spark_default")
    assert (spark.conn_type, spark.host, spark.port) == ("spark", "spark-master", 7077)


def test_the_token_over_tls_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    define_from("security/token_connection.sh", "AIRFLOW_CONN_PULSAR_DEFAULT", monkeypatch)
    config = PulsarHook().config
    assert (config.service_url, config.admin_url) == ("pulsar+ssl://broker.example.com:6651", "https://broker.example.com:8443")
    assert (config.token, config.tls_trust_certs_file_path, config.tls_validate_hostname) == ("<token>", "/etc/pulsar/ca.pem", True)


def test_the_spark_cluster_connection_is_added(airflow_db: None, tmp_path) -> None:
    from airflow.models import Connection
    from airflow.utils.session import create_session

    with create_session() as session:  # an earlier run's, in this worker's AIRFLOW_HOME
        session.query(Connection).filter(Connection.conn_id == "spark_cluster").delete()
    output = run_script(EXAMPLES / "spark" / "connections_add.sh", tmp_path)
    assert "spark_cluster" in output, output
    with create_session() as session:
        added = session.query(Connection).filter(Connection.conn_id == "spark_cluster").one()
        assert (added.conn_type, added.host, added.port) == ("spark", "spark://spark-master", 7077)
