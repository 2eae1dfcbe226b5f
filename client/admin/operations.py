"""The admin operations of one call or a fixed few: Pulsar's paths, parameters and bodies.

Each public function here (and in :mod:`.backlog`) is the body of the admin client method of the
same name, in both clients: it checks the arguments, yields :class:`~.calls.AdminCall` s and returns
the method's result. Its signature and docstring are the method's.
"""

from __future__ import annotations

from typing import Any

from ..consumer.settings import InitialPosition
from ..protocol.message_id import MessageId
from ..topic_name import TopicName
from .calls import (
    AdminCall,
    Operation,
    PeekedMessage,
    decode_document,
    decode_names,
    decode_nothing,
    decode_partitions,
    decode_policy_flag,
    peek_decoder,
)
from .errors import AdminNotFoundError
from .paths import namespace_path, namespace_policy_path, topic_name, topic_path


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def _flag(value: bool) -> str:
    return "true" if value else "false"


def non_negative_int(value: Any, what: str) -> int:
    """``value`` when it is an int >= 0 (not a bool), else ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be an int >= 0, got {value!r}")
    return value


def _stats_params(precise_backlog: bool) -> dict[str, str]:
    # subscriptionBacklogSize: newer Pulsar versions only fill a subscription's backlogSize on request.
    return {"getPreciseBacklog": _flag(precise_backlog), "subscriptionBacklogSize": "true"}


def _position_body(start: MessageId | InitialPosition) -> dict[str, Any]:
    """The message id body of a create-subscription or reset-cursor request, as Pulsar's Java admin sends it."""
    if isinstance(start, InitialPosition):
        start = MessageId.earliest if start == InitialPosition.Earliest else MessageId.latest
    if not isinstance(start, MessageId):
        raise TypeError(f"start must be a MessageId or an InitialPosition, got {start!r}")
    body: dict[str, Any] = {"ledgerId": start.ledger_id(), "entryId": start.entry_id(), "partitionIndex": start.partition()}
    if start.batch_index() >= 0:
        body["batchIndex"] = start.batch_index()
    return body


# ---- namespaces ----


def list_topics(namespace: str = "public/default") -> Operation[list[str]]:
    """Every persistent topic of ``tenant/namespace``, partitions listed individually."""
    return (yield AdminCall("list_topics", "GET", namespace_path(namespace), decode=decode_names))


def list_partitioned_topics(namespace: str = "public/default") -> Operation[list[str]]:
    """The partitioned topics of ``tenant/namespace`` (their base names)."""
    path = namespace_path(namespace, "partitioned")
    return (yield AdminCall("list_partitioned_topics", "GET", path, decode=decode_names))


def create_namespace(namespace: str) -> Operation[None]:
    """Create ``tenant/namespace``; 409 (AdminConflictError) if it exists, 404 for an unknown tenant."""
    path = namespace_policy_path(namespace)
    return (yield AdminCall("create_namespace", "PUT", path, decode=decode_nothing))


def delete_namespace(namespace: str, force: bool = False) -> Operation[None]:
    """Delete ``tenant/namespace``; 409 (AdminConflictError) while it holds topics, unless ``force``
    (which Pulsar allows only with ``forceDeleteNamespaceAllowed``)."""
    path = namespace_policy_path(namespace)
    return (yield AdminCall("delete_namespace", "DELETE", path, {"force": _flag(force)}, decode=decode_nothing))


def namespace_deduplication(namespace: str) -> Operation[bool | None]:
    """The namespace's deduplication policy; None when unset (the broker's default applies)."""
    path = namespace_policy_path(namespace, "deduplication")
    return (yield AdminCall("namespace_deduplication", "GET", path, decode=decode_policy_flag))


def set_namespace_deduplication(namespace: str, enabled: bool) -> Operation[None]:
    """Turn deduplication on or off for every topic of the namespace without a topic policy of its own."""
    path = namespace_policy_path(namespace, "deduplication")
    body = _check_flag(enabled, "enabled")
    return (yield AdminCall("set_namespace_deduplication", "POST", path, body=body, decode=decode_nothing))


# ---- topics ----


def create_topic(topic: str) -> Operation[None]:
    """Create a non-partitioned topic; 409 (AdminConflictError) if it exists."""
    return (yield AdminCall("create_topic", "PUT", topic_path(topic_name(topic)), decode=decode_nothing))


def delete_topic(topic: str, force: bool = False) -> Operation[None]:
    """Delete a non-partitioned topic and its data; ``force`` also when it has clients."""
    path = topic_path(topic_name(topic))
    return (yield AdminCall("delete_topic", "DELETE", path, {"force": _flag(force)}, decode=decode_nothing))


def create_partitioned_topic(topic: str, partitions: int) -> Operation[None]:
    """Create a partitioned topic with ``partitions`` partitions."""
    return (yield _partitions_call("create_partitioned_topic", "PUT", topic, partitions))


def update_partitioned_topic(topic: str, partitions: int) -> Operation[None]:
    """Raise a partitioned topic's partition count to ``partitions`` (it never goes down). The
    broker gives the new partitions the topic's subscriptions, at their end; open producers and
    consumers take the new partitions within the client's ``partitions_update_interval_seconds``."""
    return (yield _partitions_call("update_partitioned_topic", "POST", topic, partitions))


def _partitions_call(operation: str, method: str, topic: str, partitions: int) -> AdminCall:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions <= 0:
        raise ValueError(f"partitions must be a positive int, got {partitions!r}")
    return AdminCall(operation, method, topic_path(topic_name(topic), "partitions"), body=partitions, decode=decode_nothing)


def partitions_of(name: TopicName, operation: str) -> Operation[int]:
    """The partition count of ``name`` asked on behalf of ``operation``; 0 when not partitioned."""
    try:
        return (yield AdminCall(operation, "GET", topic_path(name, "partitions"), decode=decode_partitions))
    except AdminNotFoundError:
        return 0  # Pulsar answers 404 for a topic that does not exist (or not yet)


def partition_count(topic: str) -> Operation[int]:
    """The number of partitions; 0 for a non-partitioned (or missing) topic."""
    return (yield from partitions_of(topic_name(topic), "partition_count"))


def topic_deduplication(topic: str, applied: bool = False) -> Operation[bool | None]:
    """The topic's own deduplication policy (None when unset), or with ``applied`` the one in
    force: the topic's, else its namespace's, else the broker's default. A missing topic gives 404."""
    path = topic_path(topic_name(topic), "deduplicationEnabled")
    params = {"applied": _flag(_check_flag(applied, "applied"))}
    return (yield AdminCall("topic_deduplication", "GET", path, params, decode=decode_policy_flag))


def set_topic_deduplication(topic: str, enabled: bool) -> Operation[None]:
    """Set the topic's own deduplication policy (a partitioned topic's covers its partitions)."""
    path = topic_path(topic_name(topic), "deduplicationEnabled")
    body = _check_flag(enabled, "enabled")
    return (yield AdminCall("set_topic_deduplication", "POST", path, body=body, decode=decode_nothing))


def delete_partitioned_topic(topic: str, force: bool = False) -> Operation[None]:
    """Delete a partitioned topic with all its partitions."""
    path = topic_path(topic_name(topic), "partitions")
    call = AdminCall("delete_partitioned_topic", "DELETE", path, {"force": _flag(force)}, decode=decode_nothing)
    return (yield call)


# ---- stats ----


def stats_call(name: TopicName, precise_backlog: bool, operation: str) -> AdminCall:
    """The stats request of a non-partitioned topic or one partition, on behalf of ``operation``."""
    path = topic_path(name, "stats")
    return AdminCall(operation, "GET", path, _stats_params(precise_backlog), decode=decode_document)


def partitioned_stats_call(name: TopicName, per_partition: bool, precise_backlog: bool, operation: str) -> AdminCall:
    """The partitioned-stats request of a partitioned topic, on behalf of ``operation``."""
    path = topic_path(name, "partitioned-stats")
    params = {"perPartition": _flag(per_partition), **_stats_params(precise_backlog)}
    return AdminCall(operation, "GET", path, params, decode=decode_document)


def topic_stats(topic: str, precise_backlog: bool = False) -> Operation[dict[str, Any]]:
    """Pulsar's stats document of a non-partitioned topic or one partition."""
    return (yield stats_call(topic_name(topic), precise_backlog, "topic_stats"))


def trigger_compaction(topic: str) -> Operation[None]:
    """Start compacting a topic (every partition of a partitioned one); 409 (AdminConflictError)
    while a run is under way. The run goes on in the broker: :func:`compaction_status` follows it."""
    return (yield AdminCall("trigger_compaction", "PUT", topic_path(topic_name(topic), "compaction"), decode=decode_nothing))


def compaction_status(topic: str) -> Operation[dict[str, Any]]:
    """Pulsar's LongRunningProcessStatus of a topic's latest compaction: ``status`` (NOT_RUN,
    RUNNING, SUCCESS or ERROR) and ``lastError``."""
    return (yield AdminCall("compaction_status", "GET", topic_path(topic_name(topic), "compaction"), decode=decode_document))


def internal_stats(topic: str) -> Operation[dict[str, Any]]:
    """Pulsar's internal stats of a non-partitioned topic or one partition: its ledgers
    (``ledgerId``, ``entries``; the open ledger's count is ``currentLedgerEntries``),
    ``lastConfirmedEntry`` and each cursor's ``markDeletePosition`` as ``"ledger:entry"``."""
    return (yield internal_stats_call(topic_name(topic), "internal_stats"))


def internal_stats_call(name: TopicName, operation: str) -> AdminCall:
    """The internal-stats request of a non-partitioned topic or one partition, on behalf of ``operation``."""
    return AdminCall(operation, "GET", topic_path(name, "internalStats"), decode=decode_document)


def partitioned_internal_stats_call(name: TopicName, operation: str) -> AdminCall:
    """The partitioned-internalStats request of a partitioned topic, on behalf of ``operation``."""
    return AdminCall(operation, "GET", topic_path(name, "partitioned-internalStats"), decode=decode_document)


def partitioned_internal_stats(topic: str) -> Operation[dict[str, Any]]:
    """Pulsar's internal stats of every partition of a partitioned topic in one call:
    ``{"metadata": {"partitions": N, ...}, "partitions": {partition: internal stats}}`` (see
    :func:`internal_stats`); a non-partitioned topic gives 404 (AdminNotFoundError)."""
    return (yield partitioned_internal_stats_call(topic_name(topic), "partitioned_internal_stats"))


def partitioned_stats(topic: str, per_partition: bool = True, precise_backlog: bool = False) -> Operation[dict[str, Any]]:
    """Stats summed across partitions, with each partition's own under ``partitions``."""
    return (yield partitioned_stats_call(topic_name(topic), per_partition, precise_backlog, "partitioned_stats"))


# ---- subscriptions ----


def list_subscriptions(topic: str) -> Operation[list[str]]:
    """The subscription names of a topic (across partitions for a partitioned one)."""
    path = topic_path(topic_name(topic), "subscriptions")
    return (yield AdminCall("list_subscriptions", "GET", path, decode=decode_names))


def create_subscription(
    topic: str, subscription: str, start: MessageId | InitialPosition = InitialPosition.Latest
) -> Operation[None]:
    """Create a durable subscription starting at ``start``: Earliest, Latest or a message id."""
    path = topic_path(topic_name(topic), "subscription", subscription)
    body = _position_body(start)
    return (yield AdminCall("create_subscription", "PUT", path, body=body, decode=decode_nothing))


def delete_subscription(topic: str, subscription: str, force: bool = False) -> Operation[None]:
    """Delete a subscription; without ``force`` one with connected consumers gives 412."""
    path = topic_path(topic_name(topic), "subscription", subscription)
    call = AdminCall("delete_subscription", "DELETE", path, {"force": _flag(force)}, decode=decode_nothing)
    return (yield call)


def reset_cursor(topic: str, subscription: str, timestamp_ms: int) -> Operation[None]:
    """Move the subscription to the first message published at or after ``timestamp_ms`` (ms since
    the epoch), on every partition of a partitioned topic; its consumers are disconnected first."""
    timestamp = non_negative_int(timestamp_ms, "timestamp_ms")
    path = topic_path(topic_name(topic), "subscription", subscription, "resetcursor", str(timestamp))
    return (yield AdminCall("reset_cursor", "POST", path, decode=decode_nothing))


def reset_cursor_to_message_id(topic: str, subscription: str, message_id: MessageId | InitialPosition) -> Operation[None]:
    """Move the subscription to ``message_id`` (Earliest, Latest or an id: that message is the next
    delivered) on a non-partitioned topic or one partition (Pulsar refuses a partitioned topic with
    405); its consumers are disconnected first."""
    path = topic_path(topic_name(topic), "subscription", subscription, "resetcursor")
    body = _position_body(message_id)
    return (yield AdminCall("reset_cursor_to_message_id", "POST", path, body=body, decode=decode_nothing))


def clear_backlog(topic: str, subscription: str) -> Operation[None]:
    """Skip every message of the subscription's backlog (Pulsar's skip_all)."""
    path = topic_path(topic_name(topic), "subscription", subscription, "skip_all")
    return (yield AdminCall("clear_backlog", "POST", path, decode=decode_nothing))


def peek_message(topic: str, subscription: str, position: int = 1) -> Operation[PeekedMessage]:
    """The ``position``-th (from 1) unacknowledged message of the subscription, left unconsumed.

    A non-partitioned topic or one partition; AdminNotFoundError when there is none there.
    """
    if isinstance(position, bool) or not isinstance(position, int) or position < 1:
        raise ValueError(f"position must be an int >= 1, got {position!r}")
    name = topic_name(topic)
    path = topic_path(name, "subscription", subscription, "position", str(position))
    return (yield AdminCall("peek_message", "GET", path, decode=peek_decoder(str(name))))


def get_message_by_id(topic: str, ledger_id: int, entry_id: int) -> Operation[PeekedMessage]:
    """The entry at ``ledger_id:entry_id`` of a non-partitioned topic or one partition."""
    name = topic_name(topic)
    ledger, entry = non_negative_int(ledger_id, "ledger_id"), non_negative_int(entry_id, "entry_id")
    path = topic_path(name, "ledger", str(ledger), "entry", str(entry))
    return (yield AdminCall("get_message_by_id", "GET", path, decode=peek_decoder(str(name))))


def examine_message(
    topic: str, initial_position: str | InitialPosition = "latest", message_position: int = 1
) -> Operation[PeekedMessage]:
    """The ``message_position``-th entry (from 1) counted from the newest (``"latest"``) or the
    oldest (``"earliest"``) of a non-partitioned topic or one partition, whatever is acknowledged."""
    if isinstance(initial_position, InitialPosition):
        initial_position = "earliest" if initial_position == InitialPosition.Earliest else "latest"
    if initial_position not in ("latest", "earliest"):
        raise ValueError(f"initial_position must be 'latest' or 'earliest', got {initial_position!r}")
    if isinstance(message_position, bool) or not isinstance(message_position, int) or message_position < 1:
        raise ValueError(f"message_position must be an int >= 1, got {message_position!r}")
    name = topic_name(topic)
    params = {"initialPosition": initial_position, "messagePosition": str(message_position)}
    path = topic_path(name, "examinemessage")
    return (yield AdminCall("examine_message", "GET", path, params, decode=peek_decoder(str(name))))
