"""The asyncio API (docs/client.md)."""

import asyncio
import os

SERVICE_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650")


async def main() -> None:
    # [START asyncio]
    from airflow_pulsar.client import asyncio as pulsar_asyncio

    client = pulsar_asyncio.Client(SERVICE_URL)
    producer = await client.create_producer("events")           # batching on, as in pulsar.asyncio
    ids = await asyncio.gather(*(producer.send(b"x") for _ in range(1000)))   # in order
    consumer = await client.subscribe("events", "ingest", initial_position=pulsar_asyncio.InitialPosition.Earliest)
    message = await consumer.receive()
    await consumer.acknowledge(message)
    await client.close()
    # [END asyncio]
    print(f"sent {len(ids)}, received {message.data()!r}")


asyncio.run(main())
