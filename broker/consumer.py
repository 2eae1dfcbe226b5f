"""A consumer attached to a subscription, as the broker sees it: permits and pending entries."""

from __future__ import annotations

import time
from typing import Any, Protocol

from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandSubscribe
from airflow_pulsar.client.topic_name import TopicName

from .rates import RateMeter
from .storage import StoredEntry


class MessageSink(Protocol):
    """What a consumer needs from its connection."""

    def send_message(
        self,
        consumer_id: int,
        ledger_id: int,
        partition: int,
        entry: StoredEntry,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None: ...

    def flush(self) -> None: ...

    def close_consumer(self, consumer_id: int) -> None: ...

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None: ...

    @property
    def remote_address(self) -> str: ...

    @property
    def writable(self) -> bool:
        """False while the connection's socket has more waiting to be written than its high water mark."""
        ...


class _NamedTopic(Protocol):
    @property
    def name(self) -> TopicName: ...


class ConsumerSubscription(Protocol):
    """What a consumer reads from its subscription: its type, and the topic partition it is on."""

    @property
    def sub_type(self) -> int: ...

    @property
    def topic(self) -> _NamedTopic: ...


class ServerConsumer:
    """One consumer: the permits its client granted and the entries it holds unacknowledged.

    Permits count messages, not entries: a batch costs its size and may drive them negative, as
    in Pulsar, so the client's next FLOW has to make up the difference first.

    With ``max_unacked_messages`` set (Pulsar's maxUnackedMessagesPerConsumer, which the
    subscription sets on Shared and Key_Shared durable subscriptions) the consumer is *blocked*
    once it holds that many unacknowledged messages, and unblocked when acknowledgements (or a
    redelivery) bring them to half; a blocked consumer keeps the permits it is granted meanwhile.
    """

    def __init__(
        self,
        subscription: ConsumerSubscription,
        sink: MessageSink,
        consumer_id: int,
        name: str,
        priority: int = 0,
        key_shared_meta: Any = None,
        read_compacted: bool = False,
    ):
        self.subscription = subscription
        self.sink = sink
        self.consumer_id = consumer_id
        self.name = name
        self.priority = priority
        self.key_shared_meta = key_shared_meta
        self.read_compacted = read_compacted  # it reads the topic's compacted view
        self.partition = subscription.topic.name.partition
        self.permits = 0
        self.pending: dict[int, int] = {}  # entry id -> messages in it
        self.connected_since = time.time()
        self.msg_out = 0
        self.bytes_out = 0
        self.unacked_messages = 0
        self.max_unacked_messages = 0  # 0: no limit
        self.blocked = False
        self.out_rate = RateMeter()

    @property
    def available(self) -> bool:
        """Whether the consumer may be sent an entry now: it has permits, is not blocked on its
        unacknowledged messages, and its connection can take more."""
        return self.permits > 0 and not self.blocked and self.sink.writable

    def deliver(self, entry: StoredEntry, ledger_id: int, redelivery_count: int, ack_set: list[int] | None) -> None:
        """Send one entry and charge its messages against the permits."""
        self.pending[entry.entry_id] = entry.num_messages
        self.unacked_messages += entry.num_messages
        if self.max_unacked_messages and self.unacked_messages >= self.max_unacked_messages:
            self.blocked = True
        self._send(entry, ledger_id, redelivery_count, ack_set)

    def forward(self, entry: StoredEntry, ledger_id: int) -> None:
        """Send one entry that nothing keeps (a non-persistent topic's) and charge its messages
        against the permits; it is not held for acknowledgement, as there is nothing to redeliver."""
        self._send(entry, ledger_id, 0, None)

    def _send(self, entry: StoredEntry, ledger_id: int, redelivery_count: int, ack_set: list[int] | None) -> None:
        self.permits -= entry.num_messages
        self.msg_out += entry.num_messages
        self.bytes_out += len(entry.data)
        self.out_rate.record(entry.num_messages, len(entry.data))
        self.sink.send_message(self.consumer_id, ledger_id, self.partition, entry, redelivery_count, ack_set)

    def settle(self, entry_id: int) -> int:
        """Forget a pending entry once acknowledged or taken back for redelivery; returns the
        messages it held (0 if it was not pending)."""
        count = self.pending.pop(entry_id, 0)
        self.unacked_messages -= count
        if self.blocked and self.unacked_messages <= self.max_unacked_messages // 2:
            self.blocked = False
        return count

    def unblock(self) -> None:
        """Let the consumer be sent entries again whatever it holds (it asked for a redelivery, as in Pulsar)."""
        self.blocked = False

    @property
    def reported_unacked(self) -> int:
        """``unackedMessages`` as Pulsar reports it: counted on Shared and Key_Shared subscriptions
        (individual acknowledgement), 0 on Exclusive and Failover ones."""
        individual = self.subscription.sub_type in (CommandSubscribe.Shared, CommandSubscribe.Key_Shared)
        return max(self.unacked_messages, 0) if individual else 0

    def stats(self) -> dict[str, Any]:
        """The consumer's entry in Pulsar's subscription stats."""
        msg_rate, byte_rate = self.out_rate.rates()
        return {
            "consumerName": self.name,
            "availablePermits": self.permits,
            "unackedMessages": self.reported_unacked,
            "msgOutCounter": self.msg_out,
            "bytesOutCounter": self.bytes_out,
            "priorityLevel": self.priority,
            "address": self.sink.remote_address,
            "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
            "msgRateOut": msg_rate,
            "msgThroughputOut": byte_rate,
            "blockedConsumerOnUnackedMsgs": self.blocked,
        }
