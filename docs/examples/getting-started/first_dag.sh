# Running the first DAG (docs/getting-started.md), run by tests/airflow/test_first_dag.py with bash
# in a fresh AIRFLOW_HOME whose dags/ holds first_orders.py, with PULSAR_PORT, PULSAR_HTTP_PORT and
# PULSAR_DATA_DIR set to free ports and a folder of its own; it stops the broker afterwards.
set -euo pipefail

# [START run first dag]
PORT=${PULSAR_PORT:-6650} HTTP_PORT=${PULSAR_HTTP_PORT:-8080}
airflow-pulsar standalone --data-dir "${PULSAR_DATA_DIR:-/tmp/pulsar-data}" --port $PORT --http-port $HTTP_PORT &
export AIRFLOW_CONN_PULSAR_DEFAULT="pulsar://127.0.0.1:$PORT?admin_url=http%3A%2F%2F127.0.0.1%3A$HTTP_PORT"   # extras URL-encoded, as in any Airflow URI
airflow db migrate
airflow dags test first_orders
# [END run first dag]
