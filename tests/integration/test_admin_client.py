"""The admin REST client (sync and async) against the standalone broker process.

Every method is exercised through the broker's real HTTP port; the data comes from our own
client's producer and consumer. Errors must carry the status, the path and Pulsar's reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from airflow_pulsar.client.admin import (
    AdminConflictError,
    AdminConnectionError,
    AdminError,
    AdminNotFoundError,
    AdminPreconditionFailedError,
    AsyncPulsarAdmin,
    PulsarAdmin,
    SubscriptionBacklog,
)
from airflow_pulsar.client.exceptions import AlreadyClosed, InvalidConfiguration, PulsarException
from tests.support.ports import free_port


@pytest.fixture
def admin(broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(broker.web_url, timeout_seconds=5) as client:
        yield client


def produce(client: Client, topic: str, count: int, size: int = 10) -> list[Any]:
    producer = client.create_producer(topic, batching_enabled=False)
    try:
        return [producer.send(b"x" * size) for _ in range(count)]
    finally:
        producer.close()


def wait_for(probe: Callable[[], Any], expected: Any, timeout: float = 5.0) -> Any:
    """Poll ``probe`` until it returns ``expected`` (acks are grouped for 100 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


# ---- namespaces and topics ----


def test_non_partitioned_topic_lifecycle(admin: PulsarAdmin, topic_name: str) -> None:
    admin.create_topic(topic_name)
    assert full(topic_name) in admin.list_topics("public/default")
    assert admin.partition_count(topic_name) == 0
    assert admin.partition_count(full(topic_name)) == 0

    with pytest.raises(AdminConflictError) as conflict:
        admin.create_topic(full(topic_name))  # full form names the same topic
    assert conflict.value.status == 409
    assert conflict.value.reason == "This topic already exists"
    assert conflict.value.path == f"/admin/v2/persistent/public/default/{topic_name}"
    assert str(conflict.value).startswith(f"create_topic: PUT /admin/v2/persistent/public/default/{topic_name} failed: HTTP 409")

    admin.delete_topic(topic_name)
    assert full(topic_name) not in admin.list_topics()
    with pytest.raises(AdminNotFoundError) as missing:
        admin.delete_topic(topic_name)
    assert missing.value.status == 404
    assert missing.value.reason == f"Topic {full(topic_name)} not found"
    assert isinstance(missing.value, PulsarException)


def test_partitioned_topic_lifecycle(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    admin.create_partitioned_topic(full(topic_name), 3)
    assert admin.partition_count(topic_name) == 3
    assert admin.list_partitioned_topics() == admin.list_partitioned_topics("public/default")  # the default namespace
    assert full(topic_name) in admin.list_partitioned_topics("public/default")
    produce(our_client, topic_name, 6)
    assert {f"{full(topic_name)}-partition-{i}" for i in range(3)} <= set(admin.list_topics())

    with pytest.raises(AdminConflictError) as conflict:
        admin.create_partitioned_topic(topic_name, 3)
    assert "already exists" in conflict.value.reason
    with pytest.raises(ValueError):
        admin.create_partitioned_topic(topic_name, 0)  # refused before any request

    admin.delete_partitioned_topic(topic_name)
    assert admin.partition_count(topic_name) == 0
    assert full(topic_name) not in admin.list_partitioned_topics()
    with pytest.raises(AdminNotFoundError) as missing:
        admin.delete_partitioned_topic(topic_name)
    assert missing.value.path.endswith(f"/{topic_name}/partitions")
    assert "not found" in missing.value.reason


# ---- stats ----


def test_topic_stats_count_what_was_produced(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    with pytest.raises(AdminNotFoundError) as missing:
        admin.topic_stats(topic_name)
    assert "not found" in missing.value.reason
    produce(our_client, topic_name, 5, size=100)
    stats = admin.topic_stats(topic_name)
    assert stats["msgInCounter"] == 5
    assert stats["storageSize"] >= 500
    assert stats["subscriptions"] == {}


def test_partitioned_stats_sum_and_split_by_partition(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    produce(our_client, topic_name, 8)
    stats = admin.partitioned_stats(topic_name)
    assert stats["metadata"] == {"partitions": 2, "deleted": False}
    assert stats["msgInCounter"] == 8
    assert sorted(stats["partitions"]) == [f"{full(topic_name)}-partition-{i}" for i in range(2)]
    assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == 8
    assert admin.partitioned_stats(topic_name, per_partition=False)["partitions"] == {}
    # A single partition is a topic of its own for /stats.
    partition_0 = stats["partitions"][f"{full(topic_name)}-partition-0"]
    assert admin.topic_stats(f"{topic_name}-partition-0")["msgInCounter"] == partition_0["msgInCounter"]
    with pytest.raises(AdminNotFoundError):
        admin.partitioned_stats(topic_name + "-nope")


# ---- subscriptions ----


def test_create_subscription_at_earliest_latest_and_message_id(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    ids = produce(our_client, topic_name, 5)
    admin.create_subscription(topic_name, "from-earliest", InitialPosition.Earliest)
    admin.create_subscription(topic_name, "from-latest")  # the default, as in Pulsar
    admin.create_subscription(full(topic_name), "from-third", ids[2])
    # Pulsar does not order the list.
    assert sorted(admin.list_subscriptions(topic_name)) == ["from-earliest", "from-latest", "from-third"]
    assert admin.backlog(topic_name, "from-earliest").msg_backlog == 5
    assert admin.backlog(topic_name, "from-latest").msg_backlog == 0
    assert admin.backlog(topic_name, "from-third").msg_backlog == 3

    with pytest.raises(AdminConflictError) as conflict:
        admin.create_subscription(topic_name, "from-latest")
    assert conflict.value.reason == "Subscription already exists for topic"
    # As with Pulsar (topic auto-creation on), a subscription made on a missing topic creates it.
    admin.create_subscription(topic_name + "-made", "s")
    assert full(topic_name + "-made") in admin.list_topics()

    admin.delete_subscription(topic_name, "from-latest")
    assert sorted(admin.list_subscriptions(topic_name)) == ["from-earliest", "from-third"]
    with pytest.raises(AdminNotFoundError) as missing:
        admin.delete_subscription(topic_name, "from-latest")
    assert missing.value.reason == f"Subscription from-latest not found for topic {full(topic_name)}"
    assert "delete_subscription: DELETE" in str(missing.value)


def test_delete_subscription_with_consumers_needs_force(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "busy")  # at Latest
    produce(our_client, topic_name, 3)
    assert admin.backlog(topic_name, "busy").msg_backlog == 3
    with pytest.raises(AdminPreconditionFailedError) as busy:
        admin.delete_subscription(topic_name, "busy")
    assert busy.value.status == 412
    assert busy.value.reason == "Subscription has active connected consumers"
    assert admin.backlog(topic_name, "busy").msg_backlog == 3

    admin.delete_subscription(topic_name, "busy", force=True)
    # The kicked consumer reconnects and may create the subscription again, at Latest, as with
    # a real Pulsar: either way the old backlog is gone.
    try:
        after = admin.backlog(topic_name, "busy").msg_backlog
    except AdminNotFoundError:
        after = None
    assert after in (None, 0)
    consumer.close()


def test_subscription_names_are_escaped_in_paths(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    produce(our_client, topic_name, 2)
    admin.create_subscription(topic_name, "a b?c#d", InitialPosition.Earliest)
    assert admin.list_subscriptions(topic_name) == ["a b?c#d"]
    assert admin.backlog(topic_name, "a b?c#d").msg_backlog == 2
    admin.delete_subscription(topic_name, "a b?c#d")
    assert admin.list_subscriptions(topic_name) == []


# ---- backlog ----


def test_backlog_follows_produce_ack_and_clear(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
    assert admin.backlog(topic_name, "sub") == SubscriptionBacklog(full(topic_name), "sub", 0, 0, ())
    produce(our_client, topic_name, 10, size=50)
    after_produce = admin.backlog(topic_name, "sub")
    assert after_produce.msg_backlog == 10
    assert after_produce.backlog_size >= 500
    assert after_produce.partitions == ()

    for _ in range(4):
        consumer.acknowledge(consumer.receive(5000))
    after_ack = wait_for(lambda: admin.backlog(topic_name, "sub").msg_backlog, 6)
    assert after_ack == 6
    assert 0 < admin.backlog(topic_name, "sub").backlog_size < after_produce.backlog_size

    admin.clear_backlog(topic_name, "sub")
    cleared = admin.backlog(topic_name, "sub")
    assert (cleared.msg_backlog, cleared.backlog_size) == (0, 0)
    consumer.close()


def test_backlog_of_a_partitioned_topic_has_per_partition_figures(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 3)
    admin.create_subscription(topic_name, "sub", InitialPosition.Earliest)
    produce(our_client, topic_name, 12)
    backlog = admin.backlog(topic_name, "sub")
    assert backlog.msg_backlog == 12
    assert [p.topic for p in backlog.partitions] == [f"{full(topic_name)}-partition-{i}" for i in range(3)]
    assert sum(p.msg_backlog for p in backlog.partitions) == 12
    assert sum(p.backlog_size for p in backlog.partitions) == backlog.backlog_size > 0

    consumer = our_client.subscribe(topic_name, "sub")
    for _ in range(5):
        consumer.acknowledge(consumer.receive(5000))
    assert wait_for(lambda: admin.backlog(topic_name, "sub").msg_backlog, 7) == 7
    consumer.close()
    admin.clear_backlog(topic_name, "sub")
    assert admin.backlog(topic_name, "sub").msg_backlog == 0
    assert all(p.msg_backlog == 0 for p in admin.backlog(topic_name, "sub").partitions)


def test_backlog_of_a_missing_subscription_or_topic(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    produce(our_client, topic_name, 1)
    admin.create_subscription(topic_name, "present")
    with pytest.raises(AdminNotFoundError) as missing:
        admin.backlog(topic_name, "absent")
    message = str(missing.value)
    assert message.startswith(f"backlog: GET /admin/v2/persistent/public/default/{topic_name}/stats failed:")
    assert "subscription 'absent' not found" in message and "present" in message

    with pytest.raises(AdminNotFoundError) as no_topic:
        admin.backlog(topic_name + "-nope", "sub")
    assert no_topic.value.status == 404
    assert no_topic.value.operation == "backlog"


# ---- async ----


def test_async_admin_stats_and_backlog(broker: Any, admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    plain, partitioned = topic_name + "-plain", topic_name + "-parts"
    admin.create_topic(plain)
    admin.create_partitioned_topic(partitioned, 2)
    for topic in (plain, partitioned):
        admin.create_subscription(topic, "sub", InitialPosition.Earliest)
    produce(our_client, plain, 3)
    produce(our_client, partitioned, 4)

    async def scenario() -> tuple[Any, ...]:
        async with AsyncPulsarAdmin(broker.web_url, timeout_seconds=5) as async_admin:
            stats = await async_admin.topic_stats(plain)
            parts = await async_admin.partitioned_stats(partitioned)
            backlogs = await asyncio.gather(async_admin.backlog(plain, "sub"), async_admin.backlog(partitioned, "sub"))
            count = await async_admin.partition_count(partitioned)
            subscriptions = await async_admin.list_subscriptions(plain)
            with pytest.raises(AdminNotFoundError) as missing:
                await async_admin.backlog(plain, "absent")
            with pytest.raises(AdminConflictError):
                await async_admin.create_topic(plain)
        with pytest.raises(AlreadyClosed):
            await async_admin.topic_stats(plain)
        return stats, parts, backlogs, count, subscriptions, missing.value

    stats, parts, (plain_backlog, parts_backlog), count, subscriptions, missing = asyncio.run(scenario())
    assert stats["msgInCounter"] == 3
    assert parts["msgInCounter"] == 4 and len(parts["partitions"]) == 2
    assert plain_backlog == admin.backlog(plain, "sub") and plain_backlog.msg_backlog == 3
    assert parts_backlog == admin.backlog(partitioned, "sub") and parts_backlog.msg_backlog == 4
    assert len(parts_backlog.partitions) == 2
    assert count == 2 and subscriptions == ["sub"]
    assert "subscription 'absent' not found" in str(missing)


def test_async_admin_topic_and_subscription_methods(broker: Any, topic_name: str) -> None:
    async def scenario() -> None:
        async with AsyncPulsarAdmin(broker.web_url) as async_admin:
            await async_admin.create_topic(topic_name)
            await async_admin.create_subscription(topic_name, "s", InitialPosition.Earliest)
            assert await async_admin.list_subscriptions(topic_name) == ["s"]
            await async_admin.clear_backlog(topic_name, "s")
            await async_admin.delete_subscription(topic_name, "s", force=True)
            assert full(topic_name) in await async_admin.list_topics()
            await async_admin.delete_topic(topic_name)
            await async_admin.create_partitioned_topic(topic_name + "-p", 2)
            assert full(topic_name + "-p") in await async_admin.list_partitioned_topics()
            await async_admin.delete_partitioned_topic(topic_name + "-p")
            with pytest.raises(AdminNotFoundError):
                await async_admin.delete_topic(topic_name)

    asyncio.run(scenario())


# ---- configuration, connection failures, credentials ----


def test_unreachable_admin_service_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with PulsarAdmin(url, timeout_seconds=2) as admin:
        with pytest.raises(AdminConnectionError) as failed:
            admin.topic_stats("t")
    assert f"cannot reach the Pulsar admin service at {url}/admin/v2/persistent/public/default/t/stats" in str(failed.value)
    assert str(failed.value).startswith("topic_stats:")
    assert isinstance(failed.value.__cause__, httpx.ConnectError)

    async def scenario() -> None:
        async with AsyncPulsarAdmin(url, timeout_seconds=2) as async_admin:
            await async_admin.backlog("t", "s")

    with pytest.raises(AdminConnectionError) as async_failed:
        asyncio.run(scenario())
    assert f"backlog: cannot reach the Pulsar admin service at {url}/admin/v2/" in str(async_failed.value)


def test_bad_urls_and_settings_are_refused_up_front() -> None:
    with pytest.raises(InvalidConfiguration, match="must be http"):
        PulsarAdmin("pulsar://127.0.0.1:6650")
    with pytest.raises(InvalidConfiguration, match="must be http"):
        AsyncPulsarAdmin("127.0.0.1:8080")
    with pytest.raises(InvalidConfiguration, match="timeout_seconds"):
        PulsarAdmin("http://127.0.0.1:8080", timeout_seconds=0)
    with PulsarAdmin("http://127.0.0.1:8080") as admin, pytest.raises(ValueError, match="tenant/namespace"):
        admin.list_topics("no-namespace")


def test_closed_client_raises_already_closed(broker: Any) -> None:
    admin = PulsarAdmin(broker.web_url)
    admin.close()
    with pytest.raises(AlreadyClosed):
        admin.list_topics()


def test_token_is_sent_but_never_shown(broker: Any, topic_name: str) -> None:
    seen: list[str] = []

    def token() -> str:
        seen.append("called")
        return "s3cr3t-token"

    admin = PulsarAdmin(broker.web_url, authentication=AuthenticationToken(token))
    with admin, pytest.raises(AdminNotFoundError) as missing:
        admin.topic_stats(topic_name)
    assert seen  # headers are built per request, so refreshed tokens are used
    assert "s3cr3t" not in str(missing.value) and "s3cr3t" not in repr(missing.value) and "s3cr3t" not in repr(admin)


def test_redirects_to_the_owning_broker_keep_credentials() -> None:
    """Pulsar answers 307 toward the broker owning the topic; httpx would drop the token across hosts."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.url.host == "front":
            return httpx.Response(307, headers={"Location": f"http://owner:8080{request.url.raw_path.decode()}"})
        return httpx.Response(200, json={"partitions": 4})

    admin = PulsarAdmin("http://front:8080", authentication=AuthenticationToken("tok"))
    admin._http = httpx.Client(base_url="http://front:8080", transport=httpx.MockTransport(handler))
    assert admin.partition_count("persistent://t/ns/topic") == 4
    assert [str(r.url) for r in requests] == [
        "http://front:8080/admin/v2/persistent/t/ns/topic/partitions",
        "http://owner:8080/admin/v2/persistent/t/ns/topic/partitions",
    ]
    assert all(r.headers["Authorization"] == "Bearer tok" for r in requests)

    def loop(request: httpx.Request) -> httpx.Response:
        return httpx.Response(307, headers={"Location": str(request.url)})

    admin._http = httpx.Client(base_url="http://front:8080", transport=httpx.MockTransport(loop))
    with pytest.raises(AdminError, match="more than 5 redirects"):
        admin.partition_count("topic")

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="<html><body>Internal Server Error</body></html>")

    admin._http = httpx.Client(base_url="http://front:8080", transport=httpx.MockTransport(broken))
    with pytest.raises(AdminError) as failed:
        admin.topic_stats("topic")
    assert failed.value.status == 500
    assert "Internal Server Error" in failed.value.reason
    admin.close()


def test_backlog_orders_partitions_by_index_whatever_the_json_order() -> None:
    """A real cluster's partitioned-stats map need not be ordered; 10 sorts before 2 as text."""
    base = "persistent://public/default/many"
    order = [10, 2, 0, 11, 1, 3, 4, 5, 6, 7, 8, 9]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/partitions"):
            return httpx.Response(200, json={"partitions": 12})
        assert request.url.path.endswith("/partitioned-stats")
        assert request.url.params["perPartition"] == "true"
        parts = {f"{base}-partition-{i}": {"subscriptions": {"s": {"msgBacklog": i, "backlogSize": 10 * i}}} for i in order}
        return httpx.Response(200, json={"subscriptions": {"s": {"msgBacklog": 66, "backlogSize": 660}}, "partitions": parts})

    admin = PulsarAdmin("http://front:8080")
    admin._http = httpx.Client(base_url="http://front:8080", transport=httpx.MockTransport(handler))
    backlog = admin.backlog("many", "s")
    assert (backlog.msg_backlog, backlog.backlog_size) == (66, 660)
    assert [p.msg_backlog for p in backlog.partitions] == list(range(12))
    assert [p.topic for p in backlog.partitions] == [f"{base}-partition-{i}" for i in range(12)]
    admin.close()
