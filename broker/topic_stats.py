"""Parts of Pulsar's topic stats document: what persistent and non-persistent topics share (what
came in, what went out through the subscriptions, the epoch of an exclusive producer), and a
persistent subscription's entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cursor import estimated_backlog_size
from .rates import RateMeter
from .subscription_rules import SUB_TYPE_NAMES

if TYPE_CHECKING:
    from .subscription import Subscription


def traffic_stats(msg_in: int, bytes_in: int, in_rate: RateMeter, subscriptions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pulsar's in and out rates and counters of a topic, the out side summed over ``subscriptions``
    (each a subscription's stats document)."""
    msg_rate_in, byte_rate_in = in_rate.rates()
    return {
        "msgRateIn": msg_rate_in,
        "msgThroughputIn": byte_rate_in,
        "msgRateOut": sum(s["msgRateOut"] for s in subscriptions.values()),
        "msgThroughputOut": sum(s["msgThroughputOut"] for s in subscriptions.values()),
        "msgInCounter": msg_in,
        "bytesInCounter": bytes_in,
        "msgOutCounter": sum(s["msgOutCounter"] for s in subscriptions.values()),
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subscriptions.values()),
        "averageMsgSize": bytes_in / msg_in if msg_in else 0.0,
    }


def epoch_stats(topic_epoch: int | None) -> dict[str, Any]:
    """``topicEpoch``, absent until an exclusive producer came, as in Pulsar."""
    return {} if topic_epoch is None else {"topicEpoch": topic_epoch}


def subscription_backlog(subscription: Subscription) -> tuple[int, int]:
    """(entries not yet acknowledged, bytes estimated after the mark-delete), as Pulsar counts
    ``msgBacklog`` and ``backlogSize``: an entry is one whether it holds one message or a batch,
    and a batch acknowledged in part still counts."""
    cursor = subscription.cursor
    ledger = subscription.ledger
    last = ledger.last_entry_id
    entries = max(last - cursor.mark_delete, 0) - len(cursor.acked)
    return entries, estimated_backlog_size(ledger.total_bytes, last + 1, cursor.mark_delete)


def subscription_stats(subscription: Subscription) -> dict[str, Any]:
    """A persistent subscription's entry in Pulsar's topic stats."""
    entries, size = subscription_backlog(subscription)
    msg_rate, byte_rate = subscription.out_rate.rates()
    redeliver_rate, _ = subscription.redeliver_rate.rates()
    ledger_id = subscription.ledger.ledger_id
    return {
        "msgBacklog": entries,
        "msgBacklogNoDelayed": entries - len(subscription.delayed),
        "backlogSize": size,
        "unackedMessages": sum(c.reported_unacked for c in subscription.consumers),
        "blockedSubscriptionOnUnackedMsgs": subscription.blocked_on_unacked,
        "type": SUB_TYPE_NAMES.get(subscription.sub_type, "Exclusive") if subscription.typed else "None",
        "msgRateOut": msg_rate,
        "msgThroughputOut": byte_rate,
        "msgRateRedeliver": redeliver_rate,
        "msgOutCounter": subscription.msg_out,
        "bytesOutCounter": subscription.bytes_out,
        "isDurable": subscription.cursor.durable,
        "markDeletePosition": f"{ledger_id}:{subscription.cursor.mark_delete}",
        "readPosition": f"{ledger_id}:{subscription.read_position}",
        "consumers": [c.stats() for c in subscription.consumers],
    }
