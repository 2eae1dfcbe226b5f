"""A producer that rides out a full broker disk (docs/reliability.md): its sends wait
while the broker cannot store them and complete, each stored once, when space is freed. Run as a
script against a broker started with ``--dedup --max-storage-size 1048576``, it fills the broker
through a scratch topic, sends ten orders, frees the scratch topic and waits for their receipts."""

import os
import time

import airflow_pulsar.client as pulsar
from airflow_pulsar.client.admin import AdminError, PulsarAdmin

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")
WEB_URL = os.environ.get("PULSAR_WEB_URL", "http://127.0.0.1:8080")
TOPIC = os.environ.get("PULSAR_TOPIC", "orders")
SCRATCH = TOPIC + "-scratch"

# [START producer]
client = pulsar.Client(SERVICE_URL)
# No send timeout: a send waits for its receipt however long the broker cannot store it. The broker
# answers each failed write with PersistenceError and the client resends; with deduplication on
# (--dedup, or the namespace policy) and a fixed producer name, nothing is stored twice.
producer = client.create_producer(TOPIC, producer_name="orders-writer", send_timeout_millis=0)
# [END producer]


def fill_the_broker() -> int:
    """Send 4 KB messages to the scratch topic until one is not stored within 2 s."""
    filler = client.create_producer(SCRATCH, batching_enabled=False, send_timeout_millis=2000)
    stored = 0
    try:
        while True:
            filler.send(bytes(4096))
            stored += 1
    except pulsar.Timeout:
        return stored
    finally:
        filler.close()


def free_space() -> None:
    # [START free]
    with PulsarAdmin(WEB_URL) as admin:
        for _ in range(60):  # the delete is a write too: it can fail until it commits
            try:
                admin.delete_topic(SCRATCH, force=True)
                return
            except AdminError:
                time.sleep(0.5)
    # [END free]
    raise RuntimeError(f"could not delete {SCRATCH}")


if __name__ == "__main__":
    filled = fill_the_broker()
    receipts = []
    for n in range(10):
        order = f"order-{n}".encode().ljust(4096)  # too large for what is left
        producer.send_async(order, lambda result, message_id: receipts.append(result))
    time.sleep(3)
    while_full = len(receipts)
    free_space()
    producer.flush()
    orders = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    stored = []
    while orders.has_message_available():
        stored.append(orders.read_next(10_000).data().rstrip().decode())
    client.close()
    print(f"filled with {filled} messages; {while_full} receipts while full; after freeing: "
          f"{len(receipts)} receipts, all {'ok' if set(receipts) == {pulsar.Result.Ok} else 'NOT ok'}; "
          f"stored: {', '.join(stored)}")
