"""What lets a retried produce task publish each message once: Pulsar's deduplication, fed right.

Pulsar deduplicates by producer name and sequence id: a topic with deduplication on remembers,
per producer name, the highest sequence id it stored, answers a send whose (first) sequence id is
not above it with message id ``(-1, -1)`` and stores nothing, and tells a producer that connects
under that name where it stopped. So the produce operator

* names its producer after the task instance (:func:`producer_name`), the same on every try;
* gives each message its position in the function's output as its sequence id;
* routes with a :class:`~airflow_pulsar.client.DeterministicRouter` (or the DAG's own
  ``message_router``), whose partition for a message depends only on the message (its key, else
  its position), so a retry sends it where the earlier try did; and
* skips the messages at or below the sequence id the broker reports for their partition
  (``Producer.last_sequence_ids``).

The skipping matters: Pulsar judges a batch by its first sequence id, so a batch that straddles
what an earlier try stored (batches form by timing, differently on every try) would be dropped
whole, losing the messages past the stored ones.

Deduplication is a namespace (or topic) policy that is off by default; :func:`deduplication_in_force`
reads it through the admin REST API so the operator can warn when it is off.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from airflow_pulsar.client import (
    BatchingType,
    DeterministicRouter,
    OutgoingMessage,
    PartitionsRoutingMode,
    ProducerOptions,
)
from airflow_pulsar.client.admin import AdminError, PulsarAdmin
from airflow_pulsar.client.topic_name import TopicName

__all__ = [
    "check_producer_settings",
    "deduplication_in_force",
    "partition_of",
    "producer_name",
    "producer_settings",
    "stored_by_partition",
]

# Producer names go into message metadata, stats and logs: keep them to plain characters. Pulsar
# reserves names starting with its replicator prefix ("pulsar.repl"); ours start with "airflow.".
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_READABLE_LENGTH = 150

# Settings the operator decides itself, with the reason a DAG author reads when setting them.
_FIXED_SETTINGS = {
    "producer_name": "the operator names its producer after the task instance, so that a retry is deduplicated",
    "initial_sequence_id": "the operator numbers messages by their position in the function's output",
}


def check_producer_settings(settings: Mapping[str, Any]) -> None:
    """Refuse, at DAG parse time, producer settings that would defeat deduplication or fail sends."""
    for key, reason in _FIXED_SETTINGS.items():
        if settings.get(key) is not None:
            raise ValueError(f"producer_settings must not set {key!r}: {reason}")
    if settings.get("block_if_queue_full") is False:
        raise ValueError(
            "producer_settings must not set 'block_if_queue_full' to False: the operator waits for room in "
            "the pending queue rather than fail the sends that do not fit"
        )
    if settings.get("skip_full_partitions"):
        raise ValueError(
            "producer_settings must not set 'skip_full_partitions': the operator sends each message to the same "
            "partition on every try, whichever partition is busy"
        )
    if settings.get("batching_type") == BatchingType.KeyBased:
        raise ValueError(
            "producer_settings must not set 'batching_type' to KeyBased: the key batches of a flush interleave their "
            "sequence ids, and the broker keeps the first id of the last batch it stored, so a retry could not tell "
            "which messages an earlier try stored"
        )
    if settings.get("send_timeout_millis"):
        raise ValueError(
            "producer_settings must not set 'send_timeout_millis': the operator sends without a timeout, as Pulsar's "
            "deduplication needs (a send given up on could be overtaken by later ones, which a retry would take for "
            "proof that it was stored); bound the task with execution_timeout instead"
        )


def producer_name(dag_id: str, task_id: str, run_id: str, map_index: int) -> str:
    """The producer name of one task instance: the same on every try, different for any other.

    Readable (``airflow.<dag>.<task>.<run>[.<map index>].<digest>``, unsafe characters replaced,
    long names cut) and unique through a digest of the exact identity.
    """
    identity = json.dumps([dag_id, task_id, run_id, map_index])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    readable = _UNSAFE.sub("_", f"{dag_id}.{task_id}.{run_id}")[:_READABLE_LENGTH]
    mapped = f".{map_index}" if map_index >= 0 else ""
    return f"airflow.{readable}{mapped}.{digest}"


def producer_settings(settings: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``create_producer`` settings of the producer named ``name``, for the DAG's ``settings``.

    Its sends wait when the pending queue is full and are never given up on (no send timeout: the
    client resends until the broker stores them). Its ``message_router`` is the DAG's own if it
    has one, else a :class:`~airflow_pulsar.client.DeterministicRouter` following the routing
    mode: round robin moves to the next partition every ``batching_max_messages`` messages
    (every message without batching), so consecutive messages still share batches; single
    partition sends every unkeyed message to the partition the producer name hashes to.
    """
    options = ProducerOptions.from_settings(**settings)
    router = options.message_router
    if router is None:
        if options.message_routing_mode == PartitionsRoutingMode.UseSinglePartition:
            router = DeterministicRouter(options.hashing_scheme, default_key=name)
        else:
            run = options.batching_max_messages if options.batching_enabled else 1
            router = DeterministicRouter(options.hashing_scheme, messages_per_partition=run)
    return {
        **settings,
        "producer_name": name,
        "block_if_queue_full": True,
        "send_timeout_millis": 0,
        "message_router": router,
    }


def partition_of(router: Callable[[OutgoingMessage, int], int], message: OutgoingMessage, partitions: int) -> int:
    """The index of the partition ``router`` sends ``message`` to, of ``partitions`` (0 for a
    non-partitioned topic, which has no router)."""
    if not partitions:
        return 0
    chosen = int(router(message, partitions))
    if not 0 <= chosen < partitions:
        raise ValueError(f"message_router returned {chosen}, not in 0..{partitions - 1}")
    return chosen


def stored_by_partition(last_sequence_ids: Mapping[str, int], topic: str, partitions: int) -> list[int]:
    """The last sequence id stored on each partition of ``topic``, by partition index (one, the
    topic's own, for a non-partitioned topic), from what ``Producer.last_sequence_ids()`` returned."""
    name = TopicName.parse(topic)
    if not partitions:
        return [last_sequence_ids[str(name)]]
    return [last_sequence_ids[str(name.partition_name(index))] for index in range(partitions)]


def deduplication_in_force(admin: PulsarAdmin, topic: str) -> bool | None:
    """Whether the broker deduplicates sends to ``topic`` (which must exist); None if unknown.

    Asks for the policy in force at the topic (its own, else its namespace's, else the broker's
    default). Where topic policies are switched off on the cluster, falls back to the namespace's
    policy, which is None when unset: the broker's default (``brokerDeduplicationEnabled``) then
    applies, and the admin API does not show it. Admin errors of that second call propagate.
    """
    try:
        return admin.topic_deduplication(topic, applied=True)
    except AdminError:
        return admin.namespace_deduplication(TopicName.parse(topic).namespace_name)
