"""A PulsarHook whose client and admin were made before ``os.fork()``, as in a process that
imported it before Celery's prefork pool or Airflow's LocalExecutor forked its workers.

In the child the cached client and admin carry on over connections of the child's own; the
producer the hook made before the fork refuses, naming the fix; the parent's hook, client, admin
and producer keep working after the child used them and exited. The same holds for what a
trigger's ``run`` opened (an asyncio client and admin), even when the child cleans it up.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from airflow_pulsar.client import AlreadyClosed, MessageId
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.resources import ClosesOnCleanup
from tests.support.forked import run_forked

pytestmark = pytest.mark.timeout(300)


def test_the_hooks_cached_client_and_admin_work_in_the_child_and_stay_the_parents(broker: Any, broker_admin: Any) -> None:
    topic = f"persistent://public/default/hook-forks-{uuid.uuid4().hex[:10]}"
    hook = PulsarHook()
    client, admin = hook.get_client(), hook.get_admin()
    producer = hook.create_producer(topic)
    producer.send(b"parent-before")
    assert len(admin.topic_stats(topic)["publishers"]) == 1  # the admin's pool holds a connection now

    def child() -> dict[str, Any]:
        try:
            producer.send(b"inherited")
            refused = ""
        except AlreadyClosed as exc:
            refused = str(exc)
        assert hook.get_client() is client and hook.get_admin() is admin
        own = hook.create_producer(topic)
        sent = str(own.send(b"child"))
        stats = hook.get_admin().topic_stats(topic)
        hook.close()  # the child's own producer and connections; the parent's stay open
        return {"refused": refused, "sent": sent, "publishers": len(stats["publishers"])}

    outcome = run_forked(child)

    assert "forked" in outcome["refused"] and "Open it again in this process" in outcome["refused"]
    assert outcome["sent"] and outcome["publishers"] >= 2
    producer.send(b"parent-after")
    assert len(admin.topic_stats(topic)["publishers"]) == 1  # the parent's admin, and the child's producer gone
    reader = hook.create_reader(topic, MessageId.earliest)
    assert [reader.read_next(10_000).data() for _ in range(3)] == [b"parent-before", b"child", b"parent-after"]
    hook.close()


class _Resources(ClosesOnCleanup):
    """What a trigger's ``run`` opens, registered as the provider's triggers register it."""


def test_a_triggers_resources_cleaned_up_in_the_child_leave_the_parents_open(broker: Any, broker_admin: Any) -> None:
    topic = f"persistent://public/default/trigger-forks-{uuid.uuid4().hex[:10]}"
    hook = PulsarHook()
    holder = _Resources()
    loop = asyncio.new_event_loop()

    async def open_in_parent() -> tuple[Any, Any, Any]:
        client = hook.get_async_client()
        holder.resources.push_async_callback(client.close)
        admin = await holder.resources.enter_async_context(hook.get_async_admin())
        consumer = await client.subscribe(topic, "trigger")
        producer = await client.create_producer(topic)
        await producer.send(b"before")
        await admin.topic_stats(topic)
        return client, consumer, producer

    client, consumer, producer = loop.run_until_complete(open_in_parent())

    def child() -> dict[str, Any]:
        async def use_then_clean_up() -> dict[str, Any]:
            own = await client.create_producer(topic)
            sent = str(await own.send(b"child"))
            await holder.cleanup()  # as the triggerer's cleanup(): the child's connections only
            return {"sent": sent}

        return asyncio.run(use_then_clean_up())

    try:
        assert run_forked(child)["sent"]

        async def parent_after() -> list[bytes]:
            await producer.send(b"after")
            received = []
            for _ in range(3):
                message = await consumer.receive(10_000)
                await consumer.acknowledge(message)
                received.append(message.data())
            return received

        assert loop.run_until_complete(parent_after()) == [b"before", b"child", b"after"]
    finally:
        loop.run_until_complete(holder.cleanup())
        loop.close()
