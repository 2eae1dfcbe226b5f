# The pulsar_default connection for the embedded broker on its default ports (docs/connection.md),
# sourced by tests/airflow/test_docs_connection_examples.py, which checks what the hook makes of it.

# [START local connection]
export AIRFLOW_CONN_PULSAR_DEFAULT='{"conn_type": "pulsar", "host": "127.0.0.1", "port": 6650,
  "extra": {"admin_url": "http://127.0.0.1:8080"}}'
# [END local connection]
