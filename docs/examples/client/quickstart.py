"""The client's drop-in guide (docs/client.md): produce, consume, batch_receive and a reader."""

import os

# [START quickstart]
import airflow_pulsar.client as pulsar

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")

client = pulsar.Client(SERVICE_URL, operation_timeout_seconds=30)
producer = client.create_producer("events", compression_type=pulsar.CompressionType.LZ4)
producer.send_async(b"payload", lambda result, message_id: None, partition_key="user-1")
producer.flush()

consumer = client.subscribe("events", "ingest", consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest)
message = consumer.receive(timeout_millis=5000)
consumer.acknowledge(message)
batch = consumer.batch_receive()          # pull mode: a list per call
reader = client.create_reader("events", pulsar.MessageId.earliest)
client.close()
# [END quickstart]
print(f"received {message.data()!r}")
