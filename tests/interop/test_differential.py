"""Differential tests: one scenario run on our embedded broker and on Apache Pulsar in the same test,
the outcomes compared field by field. Where the two disagree, Pulsar is right.

Only what must differ is normalised away: ports and addresses, timestamps and rates, ledger ids
(``13:4`` and ``1:4`` both become ``L:4``), and generated names (every producer and consumer here is
named). Where our broker still differs on purpose, the test says so and asserts each broker's own
behaviour; docs/broker.md ("Tested against Apache Pulsar") lists those differences and why they stay.

Every test needs both brokers, so the module runs only with ``--brokers both`` (the default). The
official ``pulsar-client`` drives both, so the comparison does not depend on our client.
"""

from __future__ import annotations

import datetime
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone
from tests.support.official_client import assert_nothing_more, full_name, read_n, receive_n
from tests.support.polling import wait_until

pytestmark = pytest.mark.interop

NS = "/admin/v2/persistent/public/default"
JSON = {"Content-Type": "application/json"}
AT_EARLIEST = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
# "ledger:entry" positions; the ledger id is the broker's own business.
_POSITION = re.compile(r"\b\d+:(-?\d+)\b")

Scenario = Callable[[Any, pulsar.Client, str], Any]


# ---------------------------------------------------------------------------------------------
# Fixtures: both brokers for the whole module


@pytest.fixture(scope="module")
def our_broker(request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A fresh embedded broker for the module (skipped unless both brokers are selected)."""
    if request.config.getoption("--brokers") != "both":
        pytest.skip("differential tests compare both brokers: run with --brokers both")
    with tempfile.TemporaryDirectory(prefix="broker-differential-") as data_dir:
        process = BrokerProcess(Path(data_dir)).start()
        try:
            yield process
        finally:
            process.stop()


@pytest.fixture(scope="module")
def their_broker(our_broker: BrokerProcess, apache_pulsar: PulsarStandalone) -> PulsarStandalone:
    """The session's Apache Pulsar."""
    if not apache_pulsar.running:
        apache_pulsar.start()
    return apache_pulsar


@pytest.fixture(scope="module", autouse=True)
def broker_log_is_clean(our_broker: BrokerProcess) -> Iterator[None]:
    """Replaces the interop tier's check (which would start a module broker of each kind): after
    the module, our broker's log must hold no unhandled exception."""
    start = our_broker.log_path.stat().st_size if our_broker.log_path.exists() else 0
    yield
    with open(our_broker.log_path, errors="replace") as log:
        log.seek(start)
        text = log.read()
    assert "Traceback" not in text, f"the broker logged an exception:\n{text[-5000:]}"


@pytest.fixture
def brokers(our_broker: BrokerProcess, their_broker: PulsarStandalone) -> dict[str, Any]:
    """Both brokers by name, Pulsar first (the reference)."""
    return {"pulsar": their_broker, "embedded": our_broker}


@contextmanager
def official(broker: Any, **settings: Any) -> Iterator[pulsar.Client]:
    """An official client for ``broker`` with short timeouts, closed afterwards."""
    client = pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=settings.pop("operation_timeout_seconds", 10),
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **settings,
    )
    try:
        yield client
    finally:
        client.close()


def run_both(brokers: dict[str, Any], topic: str, scenario: Scenario) -> dict[str, Any]:
    """Run ``scenario(broker, client, topic)`` on each broker; the normalised outcomes by broker."""
    outcomes = {}
    for name, broker in brokers.items():
        with official(broker) as client:
            outcomes[name] = normalise(scenario(broker, client, topic))
    return outcomes


def assert_same(outcomes: dict[str, Any]) -> Any:
    """Both brokers gave the same outcome; returns it."""
    assert outcomes["embedded"] == outcomes["pulsar"], _difference(outcomes["pulsar"], outcomes["embedded"])
    return outcomes["pulsar"]


def _difference(pulsar_value: Any, ours_value: Any, path: str = "") -> str:
    """Where two outcomes first differ, for the failure message."""
    if isinstance(pulsar_value, dict) and isinstance(ours_value, dict):
        for key in sorted(set(pulsar_value) | set(ours_value), key=str):
            if pulsar_value.get(key, "<absent>") != ours_value.get(key, "<absent>"):
                return _difference(pulsar_value.get(key, "<absent>"), ours_value.get(key, "<absent>"), f"{path}.{key}")
    return f"at {path or 'top'}: Pulsar {pulsar_value!r}, embedded {ours_value!r}"


def normalise(value: Any) -> Any:
    """Ledger ids out of positions and message ids; tuples as lists, so both sides compare alike."""
    if isinstance(value, dict):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(item) for item in value]
    if hasattr(value, "ledger_id") and hasattr(value, "batch_index"):  # a message id (the C++ core's class)
        return ["L", value.entry_id(), value.partition(), value.batch_index()]
    if isinstance(value, str):
        return _POSITION.sub(lambda match: f"L:{match.group(1)}", value)
    return value


def pick(document: Any, spec: Any) -> Any:
    """The parts of ``document`` that ``spec`` names: a set of keys, a dict of key -> sub-spec, or
    ``...`` for the value itself; a list is picked item by item; an absent key shows as "<absent>"."""
    if spec is ...:
        return document
    if isinstance(document, list):
        return [pick(item, spec) for item in document]
    if isinstance(spec, set):
        spec = dict.fromkeys(spec, ...)
    return {key: pick(document[key], sub) if key in document else "<absent>" for key, sub in spec.items()}


# ---------------------------------------------------------------------------------------------
# Producing and admin calls shared by the scenarios


def produce(client: pulsar.Client, topic: str, payloads: list[bytes], batch: int = 0, name: str = "p") -> list[Any]:
    """Send ``payloads`` (in batches of exactly ``batch``, 0: unbatched); their ids in order."""
    producer = client.create_producer(
        topic,
        producer_name=name,
        batching_enabled=batch > 0,
        batching_max_messages=batch or 1000,
        batching_max_publish_delay_ms=60_000,
    )
    ids: dict[int, Any] = {}
    for index, payload in enumerate(payloads):
        producer.send_async(payload, lambda result, msg_id, index=index: ids.__setitem__(index, msg_id))
    producer.flush()
    producer.close()
    return [ids[index] for index in range(len(payloads))]


def payloads(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{index}".encode() for index in range(count)]


def admin(broker: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One admin call; redirects are not followed, so the answer is the broker's own."""
    return httpx.request(method, broker.web_url + path, timeout=30, **kwargs)


def answer(response: httpx.Response) -> list[Any]:
    """Status and Pulsar's reason (or the JSON body, or nothing) of an admin answer."""
    try:
        body = response.json()
    except ValueError:
        body = response.text or None
    if isinstance(body, dict) and set(body) == {"reason"}:
        body = body["reason"]
    return [response.status_code, body]


# ---------------------------------------------------------------------------------------------
# Admin stats: every field the provider reads


# The fields of /stats that the provider (admin client, CLI, sensor, trigger, ingestion) reads.
_CONSUMER_FIELDS = {"consumerName", "unackedMessages", "msgOutCounter"}
_SUBSCRIPTION_FIELDS = {
    "msgBacklog": ...,
    "backlogSize": ...,
    "unackedMessages": ...,
    "type": ...,
    "msgOutCounter": ...,
    "isDurable": ...,
    "consumers": _CONSUMER_FIELDS,
}
_TOPIC_FIELDS = {"msgInCounter", "bytesInCounter", "msgOutCounter", "storageSize", "backlogSize", "publishers"}


def test_topic_stats_fields_the_provider_reads(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        assert admin(broker, "PUT", f"{NS}/{topic}/subscription/idle", json=AT_EARLIEST).status_code == 204
        consumer = client.subscribe(topic, "busy", consumer_type=pulsar.ConsumerType.Shared, consumer_name="c")
        exclusive = client.subscribe(topic, "excl", consumer_name="e")  # receives all, acknowledges none
        produce(client, topic, payloads("b", 20), batch=5)  # entries 0-3
        produce(client, topic, payloads("u", 3), name="q")  # entries 4-6
        received = receive_n(consumer, 23)
        receive_n(exclusive, 23)
        for message in received[0:5] + received[10:15]:  # all of entries 0 and 2
            consumer.acknowledge(message)
        wait_until(lambda: broker.topic_stats(topic)["subscriptions"]["busy"]["msgBacklog"] == 5)
        stats = broker.topic_stats(topic)
        picked = pick(stats, _TOPIC_FIELDS | {"subscriptions"})
        picked["subscriptions"] = {name: pick(sub, _SUBSCRIPTION_FIELDS) for name, sub in stats["subscriptions"].items()}
        return picked

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert outcome["msgInCounter"] == 23 and outcome["subscriptions"]["busy"]["msgBacklog"] == 5
    # Unacknowledged messages are counted on Shared subscriptions only.
    assert outcome["subscriptions"]["busy"]["unackedMessages"] == 13
    assert outcome["subscriptions"]["excl"]["unackedMessages"] == 0


def test_partitioned_stats_and_partition_metadata(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        assert admin(broker, "PUT", f"{NS}/{topic}/partitions", json=3).status_code == 204
        assert admin(broker, "PUT", f"{NS}/{topic}/subscription/sub", json=AT_EARLIEST).status_code == 204
        producer = client.create_producer(
            topic,
            producer_name="p",
            batching_enabled=False,
            message_router=lambda message, partitions: int(message.partition_key()) % partitions,
        )
        for index in range(10):
            producer.send(b"m%d" % index, partition_key=str(index))
        producer.close()
        stats = admin(broker, "GET", f"{NS}/{topic}/partitioned-stats").json()
        return {
            "partitions": admin(broker, "GET", f"{NS}/{topic}/partitions").json(),
            "partition-0": admin(broker, "GET", f"{NS}/{topic}-partition-0/partitions").json(),
            "subscriptions": admin(broker, "GET", f"{NS}/{topic}/subscriptions").json(),
            "stats": pick(stats, {"metadata", "msgInCounter", "storageSize", "backlogSize"}),
            "sub": pick(stats["subscriptions"]["sub"], {"msgBacklog", "backlogSize", "type"}),
            "by-partition": {
                name: [part["msgInCounter"], part["subscriptions"]["sub"]["msgBacklog"]]
                for name, part in sorted(stats["partitions"].items())
            },
            "not-per-partition": admin(broker, "GET", f"{NS}/{topic}/partitioned-stats?perPartition=false").json()[
                "partitions"
            ],
        }

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert outcome["partitions"] == {"partitions": 3, "deleted": False}
    assert outcome["by-partition"][full_name(f"{topic_name}-partition-1")] == [3, 3]


def test_internal_stats_and_positions_as_the_ingestion_planner_reads_them(
    brokers: dict[str, Any], topic_name: str
) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        assert admin(broker, "PUT", f"{NS}/{topic}/subscription/plan", json=AT_EARLIEST).status_code == 204
        consumer = client.subscribe(topic, "sub", consumer_name="c", initial_position=pulsar.InitialPosition.Earliest)
        produce(client, topic, payloads("b", 10), batch=5)  # entries 0-1
        produce(client, topic, payloads("u", 3), name="q")  # entries 2-4
        received = receive_n(consumer, 13)
        for message in received[0:5] + [received[11]]:  # entries 0 and 3
            consumer.acknowledge(message)
        path = f"{NS}/{topic}/internalStats"
        wait_until(lambda: "3" in admin(broker, "GET", path).json()["cursors"]["sub"]["individuallyDeletedMessages"])
        internal = admin(broker, "GET", path).json()
        # What the ingestion operator takes from the admin API: the ledger layout ...
        layout = [[ledger["ledgerId"] > 0, ledger["entries"]] for ledger in internal["ledgers"]]
        # ... and from its exclusive hold on the subscription, through our own client.
        with Client(broker.service_url, operation_timeout_seconds=10) as ours_client:
            with SubscriptionHold(ours_client, [topic], "plan") as hold:
                states = [[str(state.mark_delete), str(state.last), state.partition] for state in hold.states()]
        return {
            **pick(internal, {"entriesAddedCounter", "numberOfEntries", "currentLedgerEntries", "lastConfirmedEntry"}),
            "layout": layout,
            "cursors": {
                name: pick(cursor, {"markDeletePosition", "individuallyDeletedMessages"})
                for name, cursor in internal["cursors"].items()
            },
            "hold": states,
        }

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert outcome["lastConfirmedEntry"] == "L:4"
    assert outcome["cursors"]["sub"] == {"markDeletePosition": "L:0", "individuallyDeletedMessages": "[(L:2..L:3]]"}
    assert outcome["hold"] == [["L:-1", "L:4", -1]]


# ---------------------------------------------------------------------------------------------
# Message ids, redeliveries, batch index acks, readers, seek


def test_message_ids_of_sends_and_receives(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        consumer = client.subscribe(topic, "sub", consumer_name="c")
        sent = produce(client, topic, payloads("b", 7), batch=3) + produce(client, topic, payloads("u", 2), name="q")
        received = receive_n(consumer, 9)
        return {
            "sent": sent,
            "received": [[m.data(), m.message_id(), m.redelivery_count(), m.producer_name()] for m in received],
            "last": consumer.get_last_message_id(),
        }

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    # Batches of three: 0..2 in entry 0, 3..5 in entry 1, 6 alone in entry 2 as a batch of one.
    assert outcome["sent"][:4] == [["L", 0, -1, 0], ["L", 0, -1, 1], ["L", 0, -1, 2], ["L", 1, -1, 0]]


def test_redelivery_counts(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        consumer = client.subscribe(
            topic, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="c", negative_ack_redelivery_delay_ms=100
        )
        produce(client, topic, payloads("m", 3))
        seen = []
        first = receive_n(consumer, 3)
        seen.append([[m.data(), m.redelivery_count()] for m in first])
        consumer.negative_acknowledge(first[0])
        again = consumer.receive(5000)
        seen.append([again.data(), again.redelivery_count()])
        consumer.negative_acknowledge(again)
        twice = consumer.receive(5000)
        seen.append([twice.data(), twice.redelivery_count()])
        consumer.acknowledge(twice)
        consumer.acknowledge(first[1])
        # The client sends acks in groups (every 100 ms) but a redelivery request at once: wait for
        # the broker to have the acks of m0 and m1, so that the request finds m2 alone unacknowledged.
        wait_until(lambda: broker.topic_stats(topic)["subscriptions"]["sub"]["msgBacklog"] == 1)
        consumer.redeliver_unacknowledged_messages()  # m2 comes back
        back = consumer.receive(5000)
        seen.append([back.data(), back.redelivery_count()])
        consumer.close()  # with m2 unacknowledged
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="c")
        after_close = consumer.receive(5000)
        seen.append([after_close.data(), after_close.redelivery_count()])
        consumer.acknowledge(after_close)
        assert_nothing_more(consumer.receive)
        return seen

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert outcome[1:3] == [[b"m0", 1], [b"m0", 2]]


def test_batch_index_acks(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        def subscribe() -> Any:
            return client.subscribe(
                topic, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="c", batch_index_ack_enabled=True
            )

        consumer = subscribe()
        produce(client, topic, payloads("m", 10), batch=5)
        received = receive_n(consumer, 10)
        for message in received[0:3] + received[5:10]:
            consumer.acknowledge(message)
        wait_until(lambda: broker.topic_stats(topic)["subscriptions"]["sub"]["msgBacklog"] == 1)
        backlog = broker.topic_stats(topic)["subscriptions"]["sub"]["msgBacklog"]
        consumer.close()
        consumer = subscribe()
        redelivered = receive_n(consumer, 2)
        assert_nothing_more(consumer.receive)
        return {"backlog": backlog, "redelivered": [[m.data(), m.message_id()] for m in redelivered]}

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert [data for data, _ in outcome["redelivered"]] == [b"m3", b"m4"]


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_started_at_a_batched_id(brokers: dict[str, Any], topic_name: str, inclusive: bool) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        ids = produce(client, topic, payloads("m", 10), batch=5)
        started = {}
        for index in (2, 4, 5):  # inside a batch, a batch's last message, a batch's first
            reader = client.create_reader(topic, ids[index], start_message_id_inclusive=inclusive)
            found = []
            while reader.has_message_available():
                found.append(reader.read_next(5000).data())
            reader.close()
            started[index] = found
        return started

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    first = 2 if inclusive else 3
    assert outcome[2] == [b"m%d" % i for i in range(first, 10)]


def test_seek(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        consumer = client.subscribe(topic, "sub", consumer_name="c", initial_position=pulsar.InitialPosition.Earliest)
        ids = produce(client, topic, payloads("m", 10), batch=5)
        received = receive_n(consumer, 10)
        consumer.acknowledge_cumulative(received[-1])
        after = {}
        for name, target in (("batched", ids[6]), ("earliest", pulsar.MessageId.earliest)):
            consumer.seek(target)
            found = []
            while True:
                try:
                    found.append(consumer.receive(1500).data())
                except pulsar.Timeout:
                    break
            after[name] = found
        backlog = broker.topic_stats(topic)["subscriptions"]["sub"]["msgBacklog"]
        return {"after": after, "backlog": backlog}

    assert_same(run_both(brokers, topic_name, scenario))


def test_producer_access_modes(brokers: dict[str, Any], topic_name: str) -> None:
    modes = pulsar.ProducerAccessMode

    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        def attempt(mode: Any, name: str) -> str:
            try:
                client.create_producer(topic, producer_name=name, access_mode=mode).close()
                return "created"
            except pulsar.PulsarException as exc:
                return type(exc).__name__

        def publishers() -> list[list[str]]:
            stats = broker.topic_stats(topic)
            return [[p["producerName"], p["accessMode"]] for p in stats["publishers"]] + [[stats.get("topicEpoch", "<absent>")]]

        steps: list[Any] = []
        owner = client.create_producer(topic, producer_name="owner", access_mode=modes.Exclusive)
        steps.append(["while exclusive", attempt(modes.Shared, "s"), attempt(modes.Exclusive, "x"), publishers()])
        # WaitForExclusive queues until the owner leaves (within the client's operation timeout);
        # meanwhile a Shared producer is busy as well.
        waiting: dict[str, Any] = {}
        # Once fenced, its send fails at its send timeout on both brokers: 5 s, not the default 30.
        thread = threading.Thread(
            target=lambda: waiting.update(
                producer=client.create_producer(
                    topic, producer_name="waiter", access_mode=modes.WaitForExclusive, send_timeout_millis=5000
                )
            )
        )
        thread.start()
        thread.join(1)
        steps.append(["queued", thread.is_alive(), attempt(modes.Shared, "s2")])
        owner.close()
        thread.join(10)
        waiter = waiting["producer"]
        waiter.send(b"from the waiter")
        steps.append(["waiter in", publishers()])
        fencer = client.create_producer(topic, producer_name="fencer", access_mode=modes.ExclusiveWithFencing)
        try:
            waiter.send(b"fenced")
            steps.append(["fenced send", "sent"])
        except pulsar.PulsarException as exc:
            steps.append(["fenced send", type(exc).__name__])
        steps.append(["fencer in", publishers()])
        fencer.close()
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        steps.append(["stored", [m.data() for m in read_n(reader, 1)]])
        assert_nothing_more(reader.read_next)
        return steps

    steps = assert_same(run_both(brokers, topic_name, scenario))
    assert steps[0][1:3] == ["ProducerBusy", "ProducerFenced"] and steps[1][1] is True


# ---------------------------------------------------------------------------------------------
# Errors for bad input

# (method, path, request options, compare the reason too)
BAD_REQUESTS: list[tuple[str, str, dict[str, Any], bool]] = [
    # unknown tenant or namespace
    ("GET", "/admin/v2/persistent/no-such-tenant/default/{t}/stats", {}, True),
    ("GET", "/admin/v2/persistent/public/no-such-ns/{t}/stats", {}, True),
    ("PUT", "/admin/v2/persistent/public/no-such-ns/{t}", {}, True),
    ("PUT", "/admin/v2/persistent/public/no-such-ns/{t}/partitions", {"json": 2}, True),
    ("GET", "/admin/v2/persistent/public/no-such-ns", {}, True),
    ("GET", "/admin/v2/persistent/public/no-such-ns/partitioned", {}, True),
    ("GET", "/admin/v2/namespaces/no-such-tenant", {}, True),
    ("GET", "/admin/v2/namespaces/public/no-such-ns", {}, True),
    ("DELETE", "/admin/v2/namespaces/public/no-such-ns", {}, True),
    ("PUT", "/admin/v2/namespaces/no-such-tenant/ns", {}, True),
    ("GET", "/admin/v2/tenants/no-such-tenant", {}, True),
    ("DELETE", "/admin/v2/tenants/no-such-tenant", {}, True),
    ("GET", "/lookup/v2/topic/persistent/public/no-such-ns/{t}", {}, True),
    # bad names
    ("GET", "/admin/v2/persistent/bad$tenant/default/{t}/stats", {}, True),
    ("GET", "/admin/v2/persistent/public/bad$ns/{t}/stats", {}, True),
    ("GET", "/admin/v2/persistent/public/default/a%2Fb/stats", {}, True),
    ("PUT", "/admin/v2/persistent/bad$tenant/default/{t}", {}, True),
    ("GET", "/admin/v2/persistent/public/bad$ns", {}, True),
    ("PUT", "/admin/v2/namespaces/public/bad$ns", {}, True),
    ("PUT", "/admin/v2/tenants/bad$tenant", {"json": {"allowedClusters": ["standalone"]}}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}-partition-1/partitions", {"json": 2}, True),
    # unknown topics and subscriptions
    ("GET", "/admin/v2/persistent/public/default/{t}-none/stats", {}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-none/partitioned-stats", {}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-none/internalStats", {}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-none/partitions", {}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-none/subscriptions", {}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}-none", {}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}-none/partitions", {}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}/subscription/none", {}, True),
    ("POST", "/admin/v2/persistent/public/default/{t}/subscription/none/skip_all", {}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}/subscription/sub", {}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}", {}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}/partitions", {}, True),
    ("POST", "/admin/v2/persistent/public/default/{t}/partitions", {"json": 4}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-parts/stats", {}, True),
    ("GET", "/admin/v2/persistent/public/default/{t}-parts-partition-7/stats", {}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}-parts", {}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}-parts/partitions", {"json": 2}, True),
    ("POST", "/admin/v2/persistent/public/default/{t}-parts/partitions", {"json": 1}, True),
    ("DELETE", "/admin/v2/persistent/public/default/{t}-parts/subscription/none", {}, True),
    # bad partitions bodies and content types: Pulsar's reason for an unparsable body is its JSON
    # parser's message in plain text, so only the status is compared there
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"json": 0}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"json": -3}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"content": "four", "headers": JSON}, False),
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"content": "{}", "headers": JSON}, False),
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"content": "", "headers": JSON}, False),
    ("PUT", "/admin/v2/persistent/public/default/{t}-bad/partitions", {"content": "4"}, True),
    (
        "PUT",
        "/admin/v2/persistent/public/default/{t}-bad/partitions",
        {"content": "4", "headers": {"Content-Type": "application/xml"}},
        True,
    ),
    # (Pulsar's 415 to a POST comes with its web server's HTML error page, to a PUT with no body)
    ("POST", "/admin/v2/persistent/public/default/{t}-parts/partitions", {"content": "4"}, False),
    ("PUT", "/admin/v2/persistent/public/default/{t}-text/partitions", {"content": "2", "headers": {"Content-Type": "text/plain"}}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}/subscription/s", {"content": "{}"}, True),
    ("PUT", "/admin/v2/persistent/public/default/{t}/subscription/s", {"content": "garbage", "headers": JSON}, False),
    ("PUT", "/admin/v2/tenants/t-{t}", {}, True),
    ("PUT", "/admin/v2/tenants/t-{t}", {"json": {}}, True),
    ("PUT", "/admin/v2/tenants/t-{t}", {"json": {"allowedClusters": ["elsewhere"]}}, True),
    ("PUT", "/admin/v2/tenants/public", {"json": {"allowedClusters": ["standalone"]}}, True),
]


def test_errors_for_bad_admin_requests(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        assert admin(broker, "PUT", f"{NS}/{topic}").status_code == 204
        assert admin(broker, "PUT", f"{NS}/{topic}/subscription/sub").status_code == 204
        assert admin(broker, "PUT", f"{NS}/{topic}-parts/partitions", json=2).status_code == 204
        outcomes = []
        for method, path, options, with_reason in BAD_REQUESTS:
            status, body = answer(admin(broker, method, path.format(t=topic), **options))
            outcomes.append([method, path, status, body if with_reason else "(not compared)"])
        return outcomes

    outcomes = run_both(brokers, topic_name, scenario)
    differing = [
        f"{theirs_answer} (Pulsar) != {ours_answer[2:]} (embedded)"
        for theirs_answer, ours_answer in zip(outcomes["pulsar"], outcomes["embedded"], strict=True)
        if ours_answer != theirs_answer
    ]
    assert not differing, "\n".join(differing)
    # Every request fails, but the one creating partitions with a plain-text body, which Pulsar takes.
    assert [path for _, path, status, _ in outcomes["pulsar"] if status < 400] == [
        "/admin/v2/persistent/public/default/{t}-text/partitions"
    ]


def test_errors_for_unknown_tenants_and_namespaces_on_the_binary_protocol(brokers: dict[str, Any], topic_name: str) -> None:
    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        outcomes = []
        for name in (f"persistent://no-such-tenant/default/{topic}", f"persistent://public/no-such-ns/{topic}"):
            for create in (lambda name=name: client.create_producer(name), lambda name=name: client.subscribe(name, "sub")):
                try:
                    create()
                    outcomes.append("created")
                except pulsar.PulsarException as exc:
                    outcomes.append(type(exc).__name__)
        return outcomes

    assert assert_same(run_both(brokers, topic_name, scenario)) == ["TopicNotFound"] * 4


# ---------------------------------------------------------------------------------------------
# Wrong credentials: one more Pulsar, with token authentication


@pytest.fixture(scope="module")
def token_brokers(our_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Both brokers requiring tokens signed with one secret key (the module's one extra Pulsar)."""
    from airflow_pulsar.broker.token_keys import create_secret_key
    from airflow_pulsar.broker.tokens import create_token

    work = tmp_path_factory.mktemp("token-brokers")
    secret = create_secret_key()
    (work / "secret.key").write_bytes(secret)
    admin_token = create_token(secret, "admin")
    config = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": f"file://{work / 'secret.key'}",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{admin_token}",
    }
    theirs = PulsarStandalone(work / "pulsar", config=config, admin_token=admin_token, jvm_options=QUICK_JIT)
    embedded = BrokerProcess(work / "embedded", "--token-secret-file", str(work / "secret.key"))
    theirs.start()
    embedded.start()
    try:
        yield {"pulsar": theirs, "embedded": embedded}, secret
    finally:
        embedded.stop()
        theirs.stop()


def test_wrong_credentials(token_brokers: tuple[dict[str, Any], bytes], topic_name: str) -> None:
    from airflow_pulsar.broker.token_keys import create_secret_key
    from airflow_pulsar.broker.tokens import create_token

    brokers, secret = token_brokers
    credentials = {
        "good": create_token(secret, "app"),
        "other-key": create_token(create_secret_key(), "app"),
        "expired": create_token(secret, "app", time.time() - 60),
        "not-a-token": "not-a-token",
        "none": None,
    }
    outcomes: dict[str, Any] = {}
    for name, broker in brokers.items():
        seen = {}
        for label, token in credentials.items():
            authentication = pulsar.AuthenticationToken(token) if token else None
            # Both brokers refuse by letting the client's lookup time out (it retries a refused
            # connection): 2 s tell that apart from a send on the topic the good token created.
            timeout = 5 if label == "good" else 2
            with official(broker, authentication=authentication, operation_timeout_seconds=timeout) as client:
                try:
                    client.create_producer(topic_name).send(b"x")
                    binary = "sent"
                except pulsar.PulsarException as exc:
                    binary = type(exc).__name__
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            status = admin(broker, "GET", f"{NS}/{topic_name}/stats", headers=headers).status_code
            seen[label] = [binary, status]
        outcomes[name] = seen
    assert_same(outcomes)
    assert outcomes["pulsar"]["good"] == ["sent", 200]


def test_http_service_url_with_a_token(token_brokers: tuple[dict[str, Any], bytes], topic_name: str) -> None:
    """The official client and ours, each given a broker's ``http://`` URL and a token, look the
    topic up over REST (the token as a Bearer header) and produce and consume on the broker found;
    with no token, the lookup is refused (the official client calls every refused HTTP lookup
    ConnectError, ours says AuthenticationError: docs/client.md)."""
    import airflow_pulsar.client as ours
    from airflow_pulsar.broker.tokens import create_token

    brokers, secret = token_brokers
    token = create_token(secret, "app")
    outcomes: dict[str, Any] = {}
    for name, broker in brokers.items():
        seen = []
        for api in (pulsar, ours):
            for authentication in (api.AuthenticationToken(token), None):
                client = api.Client(broker.web_url, authentication=authentication, operation_timeout_seconds=5)
                topic = f"{topic_name}-{api.__name__.rsplit('.', 1)[-1]}"
                try:
                    consumer = client.subscribe(topic, "sub")
                    client.create_producer(topic, batching_enabled=False).send(b"looked up over http")
                    seen.append(consumer.receive(5000).data())
                except api.PulsarException as exc:
                    seen.append(type(exc).__name__)
                finally:
                    client.close()
        outcomes[name] = seen
    assert assert_same(outcomes) == [b"looked up over http", "ConnectError", b"looked up over http", "AuthenticationError"]


# ---------------------------------------------------------------------------------------------
# The suspected divergences


def test_namespaces_and_tenants_lifecycle(brokers: dict[str, Any], topic_name: str) -> None:
    tenant = f"t-{topic_name}"[:60]

    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        info = {"adminRoles": [], "allowedClusters": ["standalone"]}
        steps = [
            ("PUT", f"/admin/v2/tenants/{tenant}", {"json": info}),
            ("GET", f"/admin/v2/tenants/{tenant}", {}),
            ("PUT", f"/admin/v2/tenants/{tenant}", {"json": info}),
            ("GET", f"/admin/v2/namespaces/{tenant}", {}),
            ("PUT", f"/admin/v2/namespaces/{tenant}/ns", {}),
            ("PUT", f"/admin/v2/namespaces/{tenant}/ns", {}),
            ("GET", f"/admin/v2/namespaces/{tenant}", {}),
            ("PUT", f"/admin/v2/persistent/{tenant}/ns/{topic}", {}),
            ("GET", f"/admin/v2/persistent/{tenant}/ns", {}),
            ("DELETE", f"/admin/v2/tenants/{tenant}", {}),
            ("DELETE", f"/admin/v2/namespaces/{tenant}/ns", {}),
            ("DELETE", f"/admin/v2/persistent/{tenant}/ns/{topic}", {}),
            ("DELETE", f"/admin/v2/namespaces/{tenant}/ns", {}),
            ("DELETE", f"/admin/v2/namespaces/{tenant}/ns", {}),
            ("GET", f"/admin/v2/namespaces/{tenant}", {}),
            ("DELETE", f"/admin/v2/tenants/{tenant}", {}),
            ("GET", f"/admin/v2/tenants/{tenant}", {}),
        ]
        outcome = [[method, path, *answer(admin(broker, method, path, **options))] for method, path, options in steps]
        policies = admin(broker, "GET", "/admin/v2/namespaces/public/default").json()
        fields = {"replication_clusters", "bundles", "deleted", "auth_policies", "backlog_quota_map"}
        outcome.append(["policies", pick(policies, fields)])
        outcome.append(["clusters", admin(broker, "GET", "/admin/v2/clusters").json()])
        # Other tests create namespaces of their own in the shared Apache Pulsar: only the default one counts.
        namespaces = admin(broker, "GET", "/admin/v2/namespaces/public").json()
        outcome.append(["public", [name for name in namespaces if name == "public/default"]])
        # A topic in a namespace made through the admin API takes messages over the binary protocol.
        assert admin(broker, "PUT", f"/admin/v2/tenants/{tenant}", json=info).status_code == 204
        assert admin(broker, "PUT", f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
        producer = client.create_producer(f"persistent://{tenant}/ns/{topic}")
        outcome.append(["sent", producer.send(b"x")])
        producer.close()
        assert admin(broker, "DELETE", f"/admin/v2/persistent/{tenant}/ns/{topic}").status_code == 204
        assert admin(broker, "DELETE", f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
        assert admin(broker, "DELETE", f"/admin/v2/tenants/{tenant}").status_code == 204
        return outcome

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    assert outcome[0][2] == 204 and outcome[-1] == ["sent", ["L", 0, -1, -1]]


def test_http_lookup(brokers: dict[str, Any], topic_name: str) -> None:
    outcomes = {}
    for name, broker in brokers.items():
        found = admin(broker, "GET", f"/lookup/v2/topic/persistent/public/default/{topic_name}")
        # The URLs are each broker's own: compare them with its service and web URLs.
        body = {key: value.replace(broker.service_url, "<service>").replace(broker.web_url, "<web>") for key, value in found.json().items()}
        outcomes[name] = [found.status_code, body]
    assert assert_same(outcomes) == [
        200,
        {"brokerUrl": "<service>", "httpUrl": "<web>", "nativeUrl": "<service>", "brokerUrlSsl": ""},
    ]


# Pulsar's delayedDeliveryTickTimeMillis (default 1000).
DELAY_TICK_SECONDS = 1.0


@pytest.mark.parametrize(
    "consumer_type",
    [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared, pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover],
    ids=lambda t: t.name,
)
def test_delayed_delivery(brokers: dict[str, Any], topic_name: str, consumer_type: pulsar.ConsumerType) -> None:
    """Shared and Key_Shared subscriptions hold a message back until its deliver_at time;
    Exclusive and Failover ones deliver it at once, in order (Pulsar's rule). Pulsar releases held
    messages on a 1 s tick and may hold the others behind them meanwhile, so the order of a Shared
    subscription is not compared, only whether each delayed message waited for its time. With
    delayedDeliveryDeliverAtTimeStrict=false (Pulsar's default) a message may leave up to one
    tick (delayedDeliveryTickTimeMillis, 1 s) before its time, so that much counts as waiting."""

    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        consumer = client.subscribe(topic, "sub", consumer_type=consumer_type, consumer_name="c")
        producer = client.create_producer(topic, producer_name="p", batching_enabled=False)
        due = {b"after": time.time() + 3, b"at": time.time() + 2.5, b"now": 0}
        producer.send(b"after", deliver_after=datetime.timedelta(seconds=3), partition_key="k")
        producer.send(b"at", deliver_at=int(due[b"at"] * 1000), partition_key="k")
        producer.send(b"now", partition_key="k")
        outcome = []
        for message in receive_n(consumer, 3, timeout_ms=10_000):
            # Waited for its time (less one tick, and a little slack for clocks read in two processes), or not.
            waited = time.time() >= due[message.data()] - DELAY_TICK_SECONDS - 0.2 if due[message.data()] else None
            outcome.append([message.data(), waited])
            consumer.acknowledge(message)
        if consumer_type in (pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared):
            outcome.sort()
        return outcome

    outcome = assert_same(run_both(brokers, topic_name, scenario))
    if consumer_type in (pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared):
        assert outcome == [[b"after", True], [b"at", True], [b"now", None]]
    else:
        assert outcome == [[b"after", False], [b"at", False], [b"now", None]]


def test_listener_name_the_broker_does_not_advertise(brokers: dict[str, Any], topic_name: str) -> None:
    """A lookup for a listener name the broker lacks fails (clients retry it until their timeout)."""
    outcomes = {}
    for name, broker in brokers.items():
        with official(broker, listener_name="external", operation_timeout_seconds=3) as client:
            try:
                client.create_producer(topic_name)
                outcomes[name] = "created"
            except pulsar.PulsarException as exc:
                outcomes[name] = type(exc).__name__
    assert assert_same(outcomes) == "Timeout"


def test_non_persistent_topics_are_served_alike(brokers: dict[str, Any], topic_name: str) -> None:
    """Both brokers serve a non-persistent topic: a message published before the consumer came is
    gone, the one after is delivered, every id is 0:0, and the stats show no storage or backlog."""
    topic = f"non-persistent://public/default/{topic_name}"

    def scenario(broker: Any, client: pulsar.Client, topic: str) -> Any:
        producer = client.create_producer(topic, producer_name="p", batching_enabled=False)
        before = producer.send(b"lost")
        consumer = client.subscribe(topic, "sub", consumer_name="c")
        after = producer.send(b"fleeting")
        message = consumer.receive(5000)
        assert_nothing_more(consumer.receive)
        stats = admin(broker, "GET", f"/admin/v2/non-persistent/public/default/{topic_name}/stats").json()
        subscription = {"msgBacklog", "msgOutCounter", "type", "isDurable"}
        spec = dict.fromkeys(("msgInCounter", "msgOutCounter", "storageSize", "backlogSize"), ...)
        picked = pick(stats, spec | {"subscriptions": {"sub": subscription}})
        ids = [[i.ledger_id(), i.entry_id()] for i in (before, after, message.message_id())]
        return [message.data(), ids, picked]

    outcome = assert_same(run_both(brokers, topic, scenario))
    assert outcome[0] == b"fleeting" and outcome[1] == [[0, 0]] * 3


def test_two_brokers_cannot_open_one_data_dir(our_broker: BrokerProcess) -> None:
    """Our broker's own storage (Pulsar's counterpart is its metadata store, not compared): a
    second broker on a data dir in use refuses to start, saying why, and the first carries on."""
    second = BrokerProcess(our_broker.data_dir)
    with pytest.raises(RuntimeError, match=r"data dir .* is in use by another broker \(pid \d+\)"):
        second.start()
    assert our_broker.process is not None and our_broker.process.poll() is None
    assert httpx.get(our_broker.web_url + "/admin/v2/clusters", timeout=5).status_code == 200
