"""A transaction with the asyncio API (docs/transactions.md)."""

import asyncio
import os
import uuid

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")
TOPIC = f"payments-{uuid.uuid4().hex[:8]}"


async def main() -> None:
    # [START asyncio]
    from airflow_pulsar.client import asyncio as pulsar_asyncio

    client = pulsar_asyncio.Client(SERVICE_URL, enable_transaction=True)
    producer = await client.create_producer(TOPIC)
    txn = await client.new_transaction()
    await producer.send(b"debit", transaction=txn)
    await producer.send(b"credit", transaction=txn)
    await txn.commit()  # both messages, or (after txn.abort()) neither
    # [END asyncio]
    consumer = await client.subscribe(TOPIC, "audit", initial_position=pulsar_asyncio.InitialPosition.Earliest)
    received = [(await consumer.receive(10_000)).data() for _ in range(2)]
    print(txn.state.value, received)
    await client.close()


asyncio.run(main())
