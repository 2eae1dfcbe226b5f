"""Where, when and on what condition a message is delivered: the delayed delivery, replication and
transaction fields of a send.

``deliver_at`` (ms since the epoch) and ``deliver_after`` (a ``timedelta`` counted from the send)
become MessageMetadata.deliver_at_time, which Shared and Key_Shared subscriptions honour (Exclusive
and Failover ones deliver at once, as Pulsar does). ``replication_clusters`` becomes replicate_to,
and ``disable_replication=True`` replicate_to = ["__local__"] (this cluster only), as the official
clients write it. Both are fields of an entry's metadata, not of a message in a batch: a delayed
message always leaves as its own entry (as the official producers send it), and a batch holds
only messages bound for the same clusters, its metadata carrying their replicate_to. A message sent
in a transaction is delivered once the transaction commits: it leaves as its own entry, its SEND
and metadata naming the transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from ..arguments import check, check_type, check_type_or_none
from ..protocol.PulsarApi_pb2 import MessageMetadata
from ..transaction import Transaction

__all__ = ["LOCAL_CLUSTER", "Delivery", "delivery_of"]

# The replicate_to value that keeps a message in the cluster it was published to.
LOCAL_CLUSTER = "__local__"
_MILLISECOND = timedelta(milliseconds=1)
_INT64_LIMIT = 1 << 63


@dataclass(slots=True, frozen=True)
class Delivery:
    """The delivery fields of one message: ``deliver_at_time`` (ms, None for at once), the
    clusters it is replicated to (empty for the namespace's own setting) and the transaction it is
    sent in (None for none)."""

    deliver_at_time: int | None
    replicate_to: tuple[str, ...]
    transaction: Transaction | None = None

    @property
    def own_entry(self) -> bool:
        """Whether the message leaves as an entry of its own, never in a batch."""
        return self.deliver_at_time is not None or self.transaction is not None

    def stamp(self, metadata: MessageMetadata) -> None:
        """Write these fields into the metadata of the message's entry."""
        if self.deliver_at_time is not None:
            metadata.deliver_at_time = self.deliver_at_time
        metadata.replicate_to.extend(self.replicate_to)
        if self.transaction is not None:
            self.transaction.id.stamp(metadata)


def delivery_of(
    replication_clusters: list[str] | None,
    disable_replication: bool,
    deliver_at: int | None,
    deliver_after: timedelta | None,
    transaction: Transaction | None = None,
) -> Delivery | None:
    """The delivery the arguments of a send ask for; None when they ask for nothing.

    As in the official client, an empty list, ``deliver_at=0`` and a zero ``deliver_after`` ask
    for nothing, ``disable_replication`` wins over ``replication_clusters`` and ``deliver_after``
    over ``deliver_at``.

    Raises:
        ValueError: an argument of the wrong type, or ``deliver_at`` outside int64 ms.
        TypeError: a cluster name that is not a str (the official client's error too).
    """
    check_type_or_none(list, replication_clusters, "replication_clusters")
    check_type(bool, disable_replication, "disable_replication")
    check_type_or_none(int, deliver_at, "deliver_at")
    check_type_or_none(timedelta, deliver_after, "deliver_after")
    check_type_or_none(Transaction, transaction, "transaction")
    if replication_clusters and not all(isinstance(cluster, str) for cluster in replication_clusters):
        raise TypeError(f"replication_clusters must be a list of cluster names (str), got {replication_clusters!r}")
    if deliver_at is not None:
        check(0 <= deliver_at < _INT64_LIMIT, "deliver_at", "a time in ms since the epoch (>= 0)", deliver_at)
    replicate_to = (LOCAL_CLUSTER,) if disable_replication else tuple(replication_clusters or ())
    deliver_at_time = deliver_at or None
    if deliver_after:
        deliver_at_time = int(time.time() * 1000) + deliver_after // _MILLISECOND
    if deliver_at_time is None and not replicate_to and transaction is None:
        return None
    return Delivery(deliver_at_time, replicate_to, transaction)
