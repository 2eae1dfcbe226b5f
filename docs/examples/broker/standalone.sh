# Starting the embedded broker from a checkout (docs/broker.md), run by
# tests/integration/test_docs_shell_examples.py with PULSAR_PORT=0 and PULSAR_HTTP_PORT=0 (free
# ports), both lines in turn, each stopped with SIGTERM once it prints its ready line.

# [START standalone]
.venv/bin/airflow-pulsar standalone --host 127.0.0.1 --port "${PULSAR_PORT:-6650}" --http-port "${PULSAR_HTTP_PORT:-8080}" --data-dir var/broker
# or: .venv/bin/python -m airflow_pulsar.broker --data-dir var/broker
# [END standalone]
