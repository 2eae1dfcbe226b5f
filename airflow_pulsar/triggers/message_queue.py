"""PulsarMessageQueueTrigger: ``MessageQueueTrigger`` with the ``pulsar`` scheme and Pulsar's arguments named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

from airflow_pulsar.hooks.pulsar import PulsarHook


class PulsarMessageQueueTrigger(MessageQueueTrigger):
    """
    The common messaging trigger for Pulsar, with the Pulsar arguments spelled out.

    The same as ``MessageQueueTrigger(scheme="pulsar", ...)``: common.messaging's
    ``MessageQueueTrigger`` picks the queue provider registered for the scheme
    (:class:`~airflow_pulsar.queues.pulsar.PulsarMessageQueueProvider`), which makes the
    :class:`~airflow_pulsar.triggers.message_event.PulsarMessageEventTrigger` that runs; this class
    names its arguments, and builds that trigger at once so a bad argument fails while the DAG is
    parsed. It serializes as that trigger, so the triggerer runs the Pulsar trigger itself.

    :param topics: A topic or a list of topics.
    :param subscription: The subscription to consume with.
    :param apply_function: Dotted path of ``function(message, *args, **kwargs)``; a truthy return
        fires an event. None: every message fires.
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default.
    :param kwargs: The Pulsar trigger's further arguments (``apply_function_args``,
        ``subscription_type``, ``initial_position``, ``redelivery_delay``, ``batch_size``,
        ``batch_timeout``, ``batch_max_bytes``, ...), and
        ``MessageQueueTrigger``'s own ``trigger_queue``.

    Example::

        orders = Asset(
            "orders",
            watchers=[
                AssetWatcher(
                    name="orders_watcher",
                    trigger=PulsarMessageQueueTrigger(topics="orders", subscription="airflow-orders"),
                )
            ],
        )
    """

    def __init__(
        self,
        *,
        topics: str | Sequence[str],
        subscription: str,
        apply_function: str | None = None,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scheme="pulsar",
            topics=topics,
            subscription=subscription,
            apply_function=apply_function,
            pulsar_conn_id=pulsar_conn_id,
            **kwargs,
        )
        _ = self.trigger  # builds the Pulsar trigger now, checking its arguments (it opens no connection)
