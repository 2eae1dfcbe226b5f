# Tokens made and checked with the command line (docs/security.md), run by
# tests/integration/test_docs_cli_examples.py in an empty folder.
set -euo pipefail

# [START tokens]
airflow-pulsar tokens create-secret-key --output secret.key       # 32 random bytes, mode 0600; never overwrites
TOKEN=$(airflow-pulsar tokens create --secret-key secret.key --subject etl --expiry 30d)
airflow-pulsar tokens validate --secret-key secret.key "$TOKEN"   # prints the subject and expiry, or why it is refused

airflow-pulsar tokens create-key-pair --signature-algorithm ES256 \
    --output-private-key es256.private --output-public-key es256.public
TOKEN=$(airflow-pulsar tokens create --private-key es256.private --signature-algorithm ES256 --subject etl)
airflow-pulsar tokens validate --public-key es256.public --signature-algorithm ES256 "$TOKEN"
# [END tokens]
