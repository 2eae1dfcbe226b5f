"""The admin REST API as official-client traffic changes it: backlog, subscriptions, topics, errors."""

from __future__ import annotations

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from tests.support.official_client import backlog, create_partitioned, full_name, produce, receive_n, wait_backlog
from tests.support.polling import wait_until

pytestmark = pytest.mark.interop

NS = "/admin/v2/persistent/public/default"


def test_backlog_with_individual_and_cumulative_acks(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str
) -> None:
    consumer = official.subscribe(topic_name, "sub")
    produce(official, topic_name, 10, batching=False)
    assert backlog(broker, topic_name, "sub") == 10
    messages = receive_n(consumer, 10)
    sub_stats = broker.topic_stats(topic_name)["subscriptions"]["sub"]
    # Pulsar counts unacknowledged messages on Shared and Key_Shared subscriptions only.
    assert sub_stats["unackedMessages"] == 0 and sub_stats["msgBacklog"] == 10

    for index in (1, 4, 8):
        consumer.acknowledge(messages[index])
    wait_backlog(broker, topic_name, "sub", 7)
    consumer.acknowledge_cumulative(messages[5])  # 0..5, of which 1 and 4 already acked
    wait_backlog(broker, topic_name, "sub", 3)  # 6, 7, 9
    consumer.acknowledge_cumulative(messages[9])
    wait_backlog(broker, topic_name, "sub", 0)
    stats = broker.topic_stats(topic_name)
    assert stats["subscriptions"]["sub"]["unackedMessages"] == 0
    assert stats["msgInCounter"] == 10 and stats["msgOutCounter"] == 10


def test_backlog_with_batches(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub")
    produce(official, topic_name, 20, batching=True)  # four batches of five
    stats = broker.topic_stats(topic_name)
    internal = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/internalStats").json()
    assert stats["msgInCounter"] == 20 and internal["entriesAddedCounter"] == 4
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 4  # entries, as Pulsar counts
    assert backlog(broker, topic_name, "sub") == 20
    messages = receive_n(consumer, 20)

    for message in messages[5:10]:  # all of the second batch
        consumer.acknowledge(message)
    wait_backlog(broker, topic_name, "sub", 15)
    # Part of a batch: without batch index acks the client holds these back until the batch is done.
    for message in messages[15:17]:
        consumer.acknowledge(message)
    # Cumulative inside the third batch: the client acknowledges up to the entry before it.
    consumer.acknowledge_cumulative(messages[12])
    wait_backlog(broker, topic_name, "sub", 10)
    consumer.acknowledge_cumulative(messages[19])
    wait_backlog(broker, topic_name, "sub", 0)


def test_backlog_with_batch_index_acks(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    produce(official, topic_name, 10, batching=True)
    messages = receive_n(consumer, 10)
    for message in messages[0:5]:  # the whole first batch
        consumer.acknowledge(message)
    wait_backlog(broker, topic_name, "sub", 5)
    for message in messages[5:8]:
        consumer.acknowledge(message)
    consumer.close()  # sends the grouped acks first
    # Batch-index acks are not visible over admin REST (on Pulsar neither): the batch counts whole.
    assert backlog(broker, topic_name, "sub") == 5
    assert broker.topic_stats(topic_name)["subscriptions"]["sub"]["msgBacklog"] == 1

    # The acknowledged indexes of a partly acknowledged batch are not delivered again.
    consumer = official.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    consumer.acknowledge(messages[8])
    consumer.close()
    consumer = official.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    assert [m.data() for m in receive_n(consumer, 1)] == [b"m9"]


def test_subscriptions_keep_their_own_backlog(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    fast = official.subscribe(topic_name, "fast")
    official.subscribe(topic_name, "slow")
    produce(official, topic_name, 6, batching=True)
    for message in receive_n(fast, 6):
        fast.acknowledge(message)
    wait_backlog(broker, topic_name, "fast", 0)
    assert backlog(broker, topic_name, "slow") == 6
    stats = broker.topic_stats(topic_name)
    assert stats["subscriptions"]["slow"]["msgBacklog"] == 2  # entries: a batch of five and one of one
    assert stats["backlogSize"] == stats["subscriptions"]["slow"]["backlogSize"] > 0
    assert stats["subscriptions"]["fast"]["backlogSize"] == 0


def test_subscriptions_list_create_delete(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    base = f"{NS}/{topic_name}"
    produce(official, topic_name, 3, batching=False)
    assert broker.admin("GET", f"{base}/subscriptions").json() == []

    assert broker.admin("PUT", f"{base}/subscription/at-latest").status_code == 204
    response = broker.admin(
        "PUT", f"{base}/subscription/at-earliest", json={"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
    )
    assert response.status_code == 204, response.text
    assert sorted(broker.admin("GET", f"{base}/subscriptions").json()) == ["at-earliest", "at-latest"]
    again = broker.admin("PUT", f"{base}/subscription/at-latest")
    assert again.status_code == 409 and again.json()["reason"]
    assert backlog(broker, topic_name, "at-latest") == 0
    assert backlog(broker, topic_name, "at-earliest") == 3

    # An official consumer picks up the admin-made subscription where it stands.
    consumer = official.subscribe(topic_name, "at-earliest")
    assert [m.data() for m in receive_n(consumer, 3)] == [b"m0", b"m1", b"m2"]

    busy = broker.admin("DELETE", f"{base}/subscription/at-earliest")
    assert busy.status_code == 412 and busy.json()["reason"]
    assert broker.admin("DELETE", f"{base}/subscription/at-latest").status_code == 204
    assert broker.admin("DELETE", f"{base}/subscription/at-earliest?force=true").status_code == 204
    # The disconnected consumer may resubscribe (recreating the subscription) before it is closed,
    # as it would against Pulsar; once it is closed, a plain delete finds it idle or gone.
    consumer.close()
    assert broker.admin("DELETE", f"{base}/subscription/at-earliest").status_code in (204, 404)
    assert broker.admin("GET", f"{base}/subscriptions").json() == []
    missing = broker.admin("DELETE", f"{base}/subscription/at-latest")
    assert missing.status_code == 404 and missing.json()["reason"]


def test_unsubscribe_from_the_official_client(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "gone")
    official.subscribe(topic_name, "kept")
    consumer.unsubscribe()
    assert broker.admin("GET", f"{NS}/{topic_name}/subscriptions").json() == ["kept"]


def test_topic_list(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    official.create_producer(topic_name).send(b"x")
    create_partitioned(broker, f"{topic_name}-p", 2)
    topics = broker.admin("GET", NS).json()
    assert full_name(topic_name) in topics
    assert {full_name(f"{topic_name}-p-partition-{i}") for i in range(2)} <= set(topics)
    assert full_name(f"{topic_name}-p") in broker.admin("GET", f"{NS}/partitioned").json()


def test_consumer_stats_show_the_official_consumer(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str
) -> None:
    consumer = official.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="the-consumer"
    )
    producer = official.create_producer(topic_name, producer_name="the-producer")
    producer.send(b"x")
    consumer.acknowledge(consumer.receive(timeout_millis=5000))
    stats = wait_until(lambda: (s := broker.topic_stats(topic_name))["subscriptions"]["sub"]["msgOutCounter"] and s)
    sub = stats["subscriptions"]["sub"]
    assert sub["type"] == "Shared"
    assert [c["consumerName"] for c in sub["consumers"]] == ["the-consumer"]
    assert [p["producerName"] for p in stats["publishers"]] == ["the-producer"]


@pytest.mark.parametrize(
    ("method", "path", "status", "reason"),
    [
        ("GET", "/admin/v2/persistent/bad$tenant/default/t/stats", 412, "Topic name is not valid"),
        ("GET", "/admin/v2/persistent/public/bad$ns/t/stats", 412, "Topic name is not valid"),
        ("GET", "/admin/v2/persistent/public/default/a%2Fb/stats", 412, "Topic name is not valid"),
        # Creating paths check the namespace part first.
        ("PUT", "/admin/v2/persistent/bad$tenant/default/t", 412, "Namespace name is not valid"),
        ("GET", "/admin/v2/persistent/public/bad$ns", 412, "Namespace name is not valid"),
        # Any non-empty local name is valid to Pulsar: this one names a topic that does not exist.
        ("GET", "/admin/v2/persistent/public/default/%20padded/stats", 404, "Topic persistent://public/default/ padded not found"),
        ("GET", "/admin/v2/persistent/public/no-such-ns/t/stats", 404, "Namespace not found"),
        ("GET", "/admin/v2/persistent/no-such-tenant/default/t/stats", 404, "Namespace not found"),
    ],
    ids=["tenant", "namespace", "slash", "create-tenant", "list-namespace", "padded-local-name", "unknown-ns", "unknown-tenant"],
)
def test_bad_topic_names_answer_as_pulsar_does(
    broker: BrokerProcess, method: str, path: str, status: int, reason: str
) -> None:
    response = broker.admin(method, path)
    assert (response.status_code, response.json()["reason"]) == (status, reason)


@pytest.mark.parametrize("suffix", ["stats", "subscriptions", "partitioned-stats"])
def test_unknown_topic_gives_404_with_reason(broker: BrokerProcess, topic_name: str, suffix: str) -> None:
    response = broker.admin("GET", f"{NS}/{topic_name}-never-made/{suffix}")
    assert response.status_code == 404
    assert topic_name in response.json()["reason"]
    # Asking did not create it.
    assert full_name(f"{topic_name}-never-made") not in broker.admin("GET", NS).json()


def test_bad_partitions_body(broker: BrokerProcess, topic_name: str) -> None:
    path = f"{NS}/{topic_name}/partitions"
    json_body = {"Content-Type": "application/json"}
    # Pulsar's reason for an unparsable body is its JSON parser's message, in plain text.
    assert broker.admin("PUT", path, content="four", headers=json_body).status_code == 400
    response = broker.admin("PUT", path, content="0", headers=json_body)
    assert (response.status_code, response.json()["reason"]) == (406, "Number of partitions should be more than 0")
    # The body must be declared JSON.
    response = broker.admin("PUT", path, content="4")
    assert (response.status_code, response.content) == (415, b"")
    assert broker.admin("GET", path).status_code == 404
