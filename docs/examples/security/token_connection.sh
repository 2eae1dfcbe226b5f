# The pulsar_default connection with a token over TLS (docs/security.md), sourced by
# tests/airflow/test_docs_connection_examples.py, which checks what the hook makes of it.

# [START token connection]
export AIRFLOW_CONN_PULSAR_DEFAULT='{
  "conn_type": "pulsar",
  "host": "pulsar+ssl://broker.example.com:6651",
  "password": "<token>",
  "extra": {
    "admin_url": "https://broker.example.com:8443",
    "tls_trust_certs_file_path": "/etc/pulsar/ca.pem"
  }
}'
# [END token connection]
