# The broker with basic, TLS-certificate and OAuth2 authentication (docs/security.md), run by
# tests/integration/test_docs_shell_examples.py in a folder holding the PEM files it names, with
# PULSAR_DATA_DIR there and PULSAR_PORT=0, PULSAR_HTTP_PORT=0 (free ports). htpasswd asks for the
# password on the terminal: the test writes users.htpasswd itself, in the hash form -m gives, and
# runs the broker command.

# [START all methods broker]
htpasswd -c -m users.htpasswd etl     # or -d (crypt DES): the two hash forms Pulsar checks
airflow-pulsar standalone --data-dir "${PULSAR_DATA_DIR:-/var/lib/pulsar}" \
    --port "${PULSAR_PORT:-6650}" --http-port "${PULSAR_HTTP_PORT:-8080}" \
    --tls-cert-file server.pem --tls-key-file server-key.pem \
    --basic-auth-conf users.htpasswd \
    --tls-trust-certs-file client-ca.pem \
    --token-public-key issuer-public.pem --token-audience-claim aud --token-audience urn:pulsar:cluster
# [END all methods broker]
