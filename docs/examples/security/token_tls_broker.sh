# The broker with token authentication and TLS (docs/security.md), run by
# tests/integration/test_docs_shell_examples.py in a folder holding secret.key, server.pem and
# server-key.pem, with PULSAR_DATA_DIR there and PULSAR_PORT=0, PULSAR_HTTP_PORT=0 (free ports);
# stopped with SIGTERM once it prints its ready line.

# [START token tls broker]
airflow-pulsar standalone --data-dir "${PULSAR_DATA_DIR:-/var/lib/pulsar}" \
    --port "${PULSAR_PORT:-6650}" --http-port "${PULSAR_HTTP_PORT:-8080}" \
    --token-secret-file secret.key \
    --tls-cert-file server.pem --tls-key-file server-key.pem
# airflow-pulsar standalone ready: service_url=pulsar+ssl://127.0.0.1:6650 web_service_url=https://127.0.0.1:8080
# [END token tls broker]
