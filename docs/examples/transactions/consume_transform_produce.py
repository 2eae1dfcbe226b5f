"""Consume, transform and produce exactly once with a transaction (docs/transactions.md)."""

import os
import uuid

import airflow_pulsar.client as pulsar

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")
RUN = uuid.uuid4().hex[:8]  # topics of their own on each run
SOURCE, TARGET = f"orders-{RUN}", f"orders-upper-{RUN}"

client = pulsar.Client(SERVICE_URL, enable_transaction=True)
feed = client.create_producer(SOURCE)
for n in range(3):
    feed.send(f"order-{n}".encode())

# [START transform]
consumer = client.subscribe(SOURCE, "transformer", initial_position=pulsar.InitialPosition.Earliest)
producer = client.create_producer(TARGET)
for _ in range(3):
    message = consumer.receive(10_000)
    txn = client.new_transaction(transaction_timeout_ms=30_000)
    try:
        producer.send(message.data().upper(), transaction=txn)  # visible once the transaction commits
        consumer.acknowledge(message, transaction=txn)  # counts once the transaction commits
        txn.commit()
    except pulsar.PulsarException:
        if txn.state is pulsar.TransactionState.OPEN:
            txn.abort()  # nothing published, and the message is delivered again
        raise
# [END transform]

reader = client.create_reader(TARGET, pulsar.MessageId.earliest)
print([reader.read_next(10_000).data().decode() for _ in range(3)])
client.close()
