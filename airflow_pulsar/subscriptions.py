"""Subscriptions placed through Pulsar's admin REST API: what the subscription operators, the
backlog sensor (``create_subscription=True``) and ``airflow-pulsar subscriptions`` share.

A position is Earliest or Latest, a message id, or a publish time in ms (see
:func:`airflow_pulsar.arguments.subscription_position`). Pulsar creates a subscription at a message
id (``PUT .../subscription/{name}``, on every partition of a partitioned topic) and resets one to a
publish time (``POST .../resetcursor/{timestamp}``, every partition too) or to a message id
(``POST .../resetcursor``, one partition at a time); a subscription at a time is created at
Earliest and then reset.
"""

from __future__ import annotations

from airflow_pulsar.arguments import SubscriptionPosition
from airflow_pulsar.client import InitialPosition, MessageId
from airflow_pulsar.client.admin import AdminConflictError, AdminNotFoundError, PulsarAdmin
from airflow_pulsar.client.topic_name import TopicName


def describe(position: SubscriptionPosition) -> str:
    """The position in words, for logs and command output."""
    if isinstance(position, InitialPosition):  # first: an IntEnum is an int too
        return position.name.lower()
    if isinstance(position, MessageId):
        return f"message id {position.ledger_id()}:{position.entry_id()}:{position.partition()}:{position.batch_index()}"
    return f"publish time {position} ms"


def _message_id_topic(admin: PulsarAdmin, topic: str, message_id: MessageId) -> str:
    """The topic a message id is placed on: ``topic`` itself, or the partition the id names when
    ``topic`` is partitioned (Pulsar resets a partitioned topic to a message id one partition at
    a time); ValueError when a partitioned topic is given an id without a partition."""
    name = TopicName.parse(topic)
    if name.partition >= 0 or not admin.partition_count(topic):
        return topic
    if message_id.partition() < 0:
        raise ValueError(
            f"topic {topic} is partitioned: a message id must name its partition ('ledger:entry:partition') "
            "or the topic its partition (name-partition-N)"
        )
    return str(name.partition_name(message_id.partition()))


def create_subscription(admin: PulsarAdmin, topic: str, subscription: str, position: SubscriptionPosition) -> bool:
    """Create a durable subscription at ``position``; False when it already exists, which is then
    left where it is. A topic that does not exist yet is created with it, as Pulsar does."""
    if isinstance(position, InitialPosition):
        start: InitialPosition | MessageId = position
    elif isinstance(position, MessageId):
        topic, start = _message_id_topic(admin, topic, position), position
    else:
        start = InitialPosition.Earliest
    try:
        admin.create_subscription(topic, subscription, start)
    except AdminConflictError:
        return False
    if not isinstance(position, (InitialPosition, MessageId)):
        admin.reset_cursor(topic, subscription, position)
    return True


def reset_subscription(admin: PulsarAdmin, topic: str, subscription: str, position: SubscriptionPosition) -> None:
    """Move an existing subscription to ``position`` (every partition of a partitioned topic, but
    for a message id, which names one); its consumers are disconnected and resubscribe there."""
    if isinstance(position, InitialPosition):
        partitions = admin.partition_count(topic) if TopicName.parse(topic).partition < 0 else 0
        parts = [str(TopicName.parse(topic).partition_name(i)) for i in range(partitions)] or [topic]
        for part in parts:
            admin.reset_cursor_to_message_id(part, subscription, position)
    elif isinstance(position, MessageId):
        admin.reset_cursor_to_message_id(_message_id_topic(admin, topic, position), subscription, position)
    else:
        admin.reset_cursor(topic, subscription, position)


def delete_subscription(admin: PulsarAdmin, topic: str, subscription: str, force: bool, missing_ok: bool) -> bool:
    """Delete a subscription (``force``: also with consumers attached; without it Pulsar refuses
    one with consumers, 412); False when it (or its topic) does not exist and ``missing_ok``."""
    try:
        admin.delete_subscription(topic, subscription, force=force)
    except AdminNotFoundError:  # no such subscription, or no such topic
        if not missing_ok:
            raise
        return False
    return True

