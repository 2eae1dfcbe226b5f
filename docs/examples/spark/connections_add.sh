# A Spark connection for a cluster (docs/spark-ingestion.md), run by
# tests/airflow/test_docs_connection_examples.py against a fresh AIRFLOW_HOME.
set -euo pipefail

# [START spark connection]
airflow connections add spark_cluster --conn-type spark --conn-host spark://spark-master --conn-port 7077
# YARN: --conn-host yarn ; Kubernetes: --conn-host k8s://https://kube-apiserver:6443
# [END spark connection]
