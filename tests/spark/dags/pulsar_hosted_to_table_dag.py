"""Ingest a topic of a hosted Pulsar service, which takes OAuth2 client credentials, into a table
with Spark: the example of the security page's Spark section (docs/security.md).

The Pulsar connection ``pulsar_hosted`` holds everything the job needs; the operator ships its
key file and CA certificates to the Spark job as files of mode 0600 (``--files``), so that no
secret reaches a command line, the Spark configuration or a log. The run's conf names the topic,
the Spark event log's directory and the Hive catalog's directories.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

# [START hosted_connection]
# The connection, e.g. as the JSON of the environment variable AIRFLOW_CONN_PULSAR_HOSTED; the key
# file is the one the service issued for the client (``{"client_id": ..., "client_secret": ...}``).
HOSTED_PULSAR = {
    "conn_type": "pulsar",
    "host": "pulsar+ssl://pulsar.example.com:6651",
    "extra": {
        "admin_url": "https://pulsar.example.com:8443",
        "auth_method": "oauth2",
        "oauth2_issuer_url": "https://auth.example.com",
        "oauth2_private_key": "/var/run/secrets/pulsar/key.json",
        "oauth2_audience": "urn:pulsar:example",
        "tls_trust_certs_file_path": "/etc/pulsar/ca.pem",
    },
}
# [END hosted_connection]

with DAG("pulsar_hosted_to_table", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
    PulsarToTableOperator(
        task_id="ingest",
        pulsar_conn_id="pulsar_hosted",
        topics="{{ dag_run.conf['topic'] }}",
        subscription="hosted-ingest",
        table="hosted_events",
        value_format="json",
        value_schema="id BIGINT, name STRING, amount DOUBLE, at TIMESTAMP",
        # The Spark connection: a spark://, YARN or Kubernetes master; without one, local[*].
        conn_id="spark_default",
        conf={
            # Spark's event log holds no credential: keep it (uncompressed, for grep).
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": "{{ dag_run.conf['event_log'] }}",
            "spark.eventLog.compress": "false",
            "spark.ui.enabled": "false",
        },
        warehouse_dir="{{ dag_run.conf['warehouse'] }}",
        metastore_dir="{{ dag_run.conf['metastore'] }}",
    )
