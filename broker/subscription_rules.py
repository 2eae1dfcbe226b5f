"""What every subscription, persistent or not, answers the same: its type's name, the refusals
it gives (Pulsar's ServerError names), and whether a consumer may join it."""

from __future__ import annotations

from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandSubscribe

from .client_limits import ClientLimits
from .consumer import ServerConsumer

SUB_TYPE_NAMES: dict[int, str] = {
    CommandSubscribe.Exclusive: "Exclusive",
    CommandSubscribe.Shared: "Shared",
    CommandSubscribe.Failover: "Failover",
    CommandSubscribe.Key_Shared: "Key_Shared",
}

class SubscriptionError(Exception):
    """A request the subscription refuses; ``code`` is a Pulsar ServerError name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def check_can_join(name: str, consumers: list[ServerConsumer], current_type: int, sub_type: int, limits: ClientLimits) -> None:
    """Raise SubscriptionError if a consumer of ``sub_type`` may not join the subscription
    ``name`` now, as Pulsar refuses one (persistent and non-persistent subscriptions alike)."""
    if not consumers:
        return
    if sub_type != current_type:
        raise SubscriptionError(
            "ConsumerBusy",
            f"subscription {name} is of type {SUB_TYPE_NAMES.get(current_type)}, not {SUB_TYPE_NAMES.get(sub_type)}",
        )
    if sub_type == CommandSubscribe.Exclusive:
        raise SubscriptionError("ConsumerBusy", f"exclusive subscription {name} already has a consumer")
    limit = limits.max_consumers_per_subscription
    if limit and len(consumers) >= limit:
        raise SubscriptionError("ConsumerBusy", "Subscription reached max consumers limit")  # Pulsar's words
