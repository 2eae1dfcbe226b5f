# The broker with basic, TLS-certificate and OAuth2 authentication (docs/security.md), run by
# tests/integration/test_docs_shell_examples.py in a folder holding the PEM files it names, with
# PULSAR_DATA_DIR there and PULSAR_PORT=0, PULSAR_HTTP_PORT=0 (free ports). The first line asks for
# the password on a terminal: the test gives it one, types the password twice, then runs the broker.

# [START all methods broker]
printf 'etl:%s\n' "$(openssl passwd -apr1)" > users.htpasswd   # asks for etl's password; as htpasswd -m writes
airflow-pulsar standalone --data-dir "${PULSAR_DATA_DIR:-/var/lib/pulsar}" \
    --port "${PULSAR_PORT:-6650}" --http-port "${PULSAR_HTTP_PORT:-8080}" \
    --tls-cert-file server.pem --tls-key-file server-key.pem \
    --basic-auth-conf users.htpasswd \
    --tls-trust-certs-file client-ca.pem \
    --token-public-key issuer-public.pem --token-audience-claim aud --token-audience urn:pulsar:cluster
# [END all methods broker]
