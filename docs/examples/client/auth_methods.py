"""Every authentication method of the client (docs/security.md), against a broker that enables
basic, TLS client certificates and OAuth2 tokens at once.

Where the broker, the CA, the OAuth2 issuer and the client's credentials are comes from the
environment, with a production cluster's values as the defaults."""

import json
import os

# [START methods]
from airflow_pulsar.client import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    Client,
)

url = os.environ.get("PULSAR_SERVICE_URL", "pulsar+ssl://broker.example.com:6651")
ca = os.environ.get("PULSAR_CA", "/etc/pulsar/ca.pem")
etc = os.environ.get("PULSAR_ETC", "/etc/pulsar")   # the client's certificate, key and OAuth2 credentials
issuer_url = os.environ.get("OAUTH2_ISSUER_URL", "https://auth.example.com")

oauth2_json = json.dumps({
    "issuer_url": issuer_url,                # the token endpoint comes from its /.well-known/openid-configuration
    "private_key": f"{etc}/etl-key.json",    # or file:///..., or data:application/json;base64,...; holds client_id, client_secret
    "audience": "urn:pulsar:cluster", "scope": "pulsar"})
basic_json = '{"username": "etl", "password": "secret"}'
methods = [
    AuthenticationBasic("etl", "secret"),
    AuthenticationTLS(f"{etc}/client.pem", f"{etc}/client-key.pem"),
    AuthenticationOauth2(oauth2_json),
    # The generic form takes the plugin names and params strings the official client takes
    # (also Authentication("token", "file:///etc/pulsar/token"), token:<jwt>, env:VAR or the token):
    Authentication("basic", basic_json),
    Authentication("tls", f"tlsCertFile:{etc}/client.pem,tlsKeyFile:{etc}/client-key.pem"),
    Authentication("oauth2token", oauth2_json),              # and the Java class names, e.g.
    Authentication("org.apache.pulsar.client.impl.auth.AuthenticationBasic", basic_json),
]
for authentication in methods:
    with Client(url, authentication=authentication, tls_trust_certs_file_path=ca) as client:
        client.create_producer("audit").send(b"authenticated")
# [END methods]
print(f"{len(methods)} methods authenticated")
