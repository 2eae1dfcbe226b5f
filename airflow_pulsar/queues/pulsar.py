"""The ``pulsar`` message-queue provider for ``MessageQueueTrigger`` (apache-airflow-providers-common-messaging)."""

from __future__ import annotations

from airflow.providers.common.messaging.providers.base_provider import BaseMessageQueueProvider
from airflow.triggers.base import BaseEventTrigger

from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger


class PulsarMessageQueueProvider(BaseMessageQueueProvider):
    """
    Make ``MessageQueueTrigger(scheme="pulsar", ...)`` a :class:`PulsarMessageEventTrigger`.

    The keyword arguments after ``scheme`` are the trigger's (``topics``, ``subscription``,
    ``apply_function``, ``max_redeliver_count`` and ``dead_letter_topic`` for a dead-letter
    policy, ``batch_size``, ``batch_timeout`` and ``batch_max_bytes`` for an event per bounded
    batch of messages instead of per message, ``acknowledge="on_success"`` and ``ack_timeout`` to
    acknowledge messages only once the run they started has succeeded, ...). The deprecated queue-URI form (``queue="pulsar://..."``) is not
    supported: a Pulsar connection, not a URI, says where the broker is. Example::

        from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
        from airflow.sdk import Asset, AssetWatcher

        trigger = MessageQueueTrigger(scheme="pulsar", topics=["orders"], subscription="airflow-orders")
        orders = Asset("orders", watchers=[AssetWatcher(name="orders_watcher", trigger=trigger)])

        # An event per batch of up to 500 orders, closed 10 s after its first order.
        batches = MessageQueueTrigger(
            scheme="pulsar", topics=["orders"], subscription="airflow-batches", batch_size=500, batch_timeout=10
        )
    """

    scheme = "pulsar"

    def trigger_class(self) -> type[BaseEventTrigger]:
        """The trigger that watches Pulsar for asset events."""
        return PulsarMessageEventTrigger
