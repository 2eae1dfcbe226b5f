"""A client and an admin client of a broker that requires tokens over TLS (docs/security.md).

The broker's URLs, the token and the CA file come from the environment, with a production
cluster's values as the defaults."""

import os

# [START secured]
from airflow_pulsar.client import AuthenticationToken, Client
from airflow_pulsar.client.admin import PulsarAdmin

token = os.environ["PULSAR_TOKEN"]
service_url = os.environ.get("PULSAR_SERVICE_URL", "pulsar+ssl://broker.example.com:6651")
admin_url = os.environ.get("PULSAR_ADMIN_URL", "https://broker.example.com:8443")
ca = os.environ.get("PULSAR_CA", "/etc/pulsar/ca.pem")

client = Client(
    service_url,
    authentication=AuthenticationToken(token),        # or a callable returning a fresh token
    tls_trust_certs_file_path=ca,                     # default: the system's CAs
)
admin = PulsarAdmin(
    admin_url,
    authentication=AuthenticationToken(token),
    tls_trust_certs_file_path=ca,
)
# [END secured]
client.create_producer("secured-orders").send(b"over TLS, with a token")
print(admin.list_topics("public/default"))
admin.close()
client.close()
