# The connections to a real Pulsar cluster and a real Spark cluster (docs/getting-started.md),
# sourced by tests/airflow/test_docs_connection_examples.py, which checks what Airflow and the hook
# make of them.

# [START real clusters]
# Pulsar: service URL, admin URL, token (password) and TLS trust file
export AIRFLOW_CONN_PULSAR_DEFAULT='{"conn_type": "pulsar", "host": "pulsar+ssl://pulsar.example.com:6651",
  "password": "<jwt>", "extra": {"admin_url": "https://pulsar.example.com:8443",
  "tls_trust_certs_file_path": "/etc/pulsar/ca.pem"}}'
# Spark: a standalone master (or host "yarn", or "k8s://https://kube-apiserver:6443")
export AIRFLOW_CONN_SPARK_DEFAULT='spark://spark-master:7077'
# [END real clusters]
