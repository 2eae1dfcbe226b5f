"""The part of Pulsar's topic stats document that persistent and non-persistent topics share: what
came in, what went out through the subscriptions, and the epoch of an exclusive producer."""

from __future__ import annotations

from typing import Any

from .rates import RateMeter


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
