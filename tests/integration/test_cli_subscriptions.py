"""``airflow-pulsar subscriptions create|list|reset|delete`` against the broker process, run as a user runs them."""

from __future__ import annotations

import time

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.cli_command import run

MESSAGES = 4


def _send(broker: BrokerProcess, topic: str, count: int) -> list[str]:
    """Send ``count`` unbatched messages; their ids as ``ledger:entry:partition``."""
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(count)]
    return [f"{i.ledger_id()}:{i.entry_id()}:{i.partition()}" for i in ids]


def _backlog(broker: BrokerProcess, topic: str, subscription: str) -> int:
    with PulsarAdmin(broker.web_url) as admin:
        return admin.backlog(topic, subscription).msg_backlog


def test_subscriptions_lifecycle(broker: BrokerProcess, topic_name: str) -> None:
    assert run(broker, "topics", "create", topic_name).returncode == 0
    created = run(broker, "subscriptions", "create", topic_name, "audit")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == f"created subscription audit on {topic_name} at earliest"
    again = run(broker, "subscriptions", "create", topic_name, "audit", "--position", "latest")
    assert again.returncode == 0 and "already exists" in again.stdout and "left as it is" in again.stdout
    assert run(broker, "subscriptions", "create", topic_name, "tail", "--position", "latest").returncode == 0
    assert run(broker, "subscriptions", "list", topic_name).stdout.split() == ["audit", "tail"]

    before = int(time.time() * 1000)
    ids = _send(broker, topic_name, MESSAGES)
    assert (_backlog(broker, topic_name, "audit"), _backlog(broker, topic_name, "tail")) == (MESSAGES, MESSAGES)

    # Forward to the last message's id, back to a time before the first, then to the end.
    assert run(broker, "subscriptions", "reset", topic_name, "audit", "--to", ids[-1]).returncode == 0
    assert _backlog(broker, topic_name, "audit") == 1
    reset = run(broker, "subscriptions", "reset", topic_name, "audit", "--to", str(before))
    assert reset.returncode == 0 and f"publish time {before} ms" in reset.stdout
    assert _backlog(broker, topic_name, "audit") == MESSAGES
    assert run(broker, "subscriptions", "reset", topic_name, "audit", "--to", "latest").returncode == 0
    assert _backlog(broker, topic_name, "audit") == 0

    # A subscription created at a message id starts there.
    assert run(broker, "subscriptions", "create", topic_name, "late", "--position", ids[2]).returncode == 0
    assert _backlog(broker, topic_name, "late") == MESSAGES - 2

    assert run(broker, "subscriptions", "delete", topic_name, "audit").returncode == 0
    assert run(broker, "subscriptions", "list", topic_name).stdout.split() == ["late", "tail"]
    gone = run(broker, "subscriptions", "delete", topic_name, "audit")
    assert gone.returncode == 1 and "404" in gone.stderr and "Traceback" not in gone.stderr


def test_subscriptions_on_a_partitioned_topic(broker: BrokerProcess, topic_name: str) -> None:
    assert run(broker, "topics", "create", topic_name, "--partitions", "2").returncode == 0
    assert run(broker, "subscriptions", "create", topic_name, "all").returncode == 0
    ids = _send(broker, topic_name, MESSAGES)
    assert _backlog(broker, topic_name, "all") == MESSAGES
    assert run(broker, "subscriptions", "reset", topic_name, "all", "--to", "latest").returncode == 0
    assert _backlog(broker, topic_name, "all") == 0
    assert run(broker, "subscriptions", "reset", topic_name, "all", "--to", "earliest").returncode == 0
    assert _backlog(broker, topic_name, "all") == MESSAGES

    # A message id without its partition cannot name a place in a partitioned topic.
    ledger, entry, _ = ids[0].split(":")
    vague = run(broker, "subscriptions", "reset", topic_name, "all", "--to", f"{ledger}:{entry}")
    assert vague.returncode == 1 and "is partitioned" in vague.stderr and "Traceback" not in vague.stderr


def test_bad_positions_are_refused_in_one_line(broker: BrokerProcess, topic_name: str) -> None:
    for args in (("create", topic_name, "s", "--position", "sideways"), ("reset", topic_name, "s", "--to", "-3")):
        result = run(broker, "subscriptions", *args)
        assert result.returncode == 1, result
        assert "must be 'earliest', 'latest', a message id" in result.stderr and "Traceback" not in result.stderr
    missing = run(broker, "subscriptions", "reset", topic_name, "nobody", "--to", "earliest")
    assert missing.returncode == 1 and "404" in missing.stderr and "Traceback" not in missing.stderr
