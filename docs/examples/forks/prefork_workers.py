"""Pulsar in prefork workers (docs/forks.md): the client made at import, one producer per
worker process, opened as the worker starts. Run as a script, it forks a pool of two workers."""

import multiprocessing
import os

import airflow_pulsar.client as pulsar

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")
TOPIC = os.environ.get("PULSAR_TOPIC", "orders")

# [START prefork]
# Made at import, in the parent, before the pool forks: in each worker it reconnects on first use.
client = pulsar.Client(SERVICE_URL)
producer = None  # this worker process's own producer


def open_producer(**_):
    """Runs once in each worker process as it starts (Celery: @worker_process_init.connect)."""
    global producer
    producer = client.create_producer(TOPIC)


def publish(order):
    """The task: sends on this worker's own producer."""
    return str(producer.send(order.encode()))
# [END prefork]


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2, initializer=open_producer) as pool:
        ids = pool.map(publish, [f"order-{n}" for n in range(6)])
    # The parent's client works on after its workers used their copies of it.
    consumer = client.subscribe(TOPIC, "prefork-check", initial_position=pulsar.InitialPosition.Earliest)
    received = sorted(consumer.receive(10_000).data().decode() for _ in ids)
    client.close()
    print(f"published {len(set(ids))} from the workers; received {', '.join(received)}")
