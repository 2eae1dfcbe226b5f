"""End-to-end encryption (docs/client.md): keys/public.pem and keys/private.pem are an RSA pair."""

import os

import airflow_pulsar.client as pulsar

client = pulsar.Client(os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650"))

# [START encryption]
keys = pulsar.CryptoKeyReader("keys/public.pem", "keys/private.pem")   # PEM files
producer = client.create_producer("payments", encryption_key="payments-2024", crypto_key_reader=keys)
consumer = client.subscribe("payments", "audit", crypto_key_reader=keys,
                            crypto_failure_action=pulsar.ConsumerCryptoFailureAction.FAIL)
producer.send(b"card ending 4242")

message = consumer.receive()
message.encryption_context()   # key names, IV, codec, batch size; None for a message sent in clear
# [END encryption]
assert message.data() == b"card ending 4242", message.data()
assert message.encryption_context() is not None
client.close()
print("decrypted", message.data())
