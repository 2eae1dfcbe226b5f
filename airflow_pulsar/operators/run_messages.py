"""Operators that settle the messages a DAG run was started for, with a watcher that acknowledges
``on_success``: the run's last step acknowledges them once it succeeded, or releases them when it
failed, so that they come back in a later event.

Both read the run's ``triggering_asset_events`` and publish one settle notice per watcher (its
``settle_topic``, named in each event); the watcher settles the messages through the consumer
that received them (see :mod:`airflow_pulsar.triggers.run_settlement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.run_settlement import Outcome, SettleNotice, notices_by_topic


def event_payloads(triggering_asset_events: Mapping[Any, Iterable[Any]] | None) -> list[Mapping[str, Any]]:
    """The payloads of the message events among a run's triggering asset events."""
    payloads = []
    for events in (triggering_asset_events or {}).values():
        for event in events:
            payload = (event.extra or {}).get("payload")
            if isinstance(payload, Mapping):
                payloads.append(payload)
    return payloads


class PulsarSettleRunMessagesOperator(BaseOperator):
    """Publish a settle notice with ``outcome`` for every watcher whose events started this run;
    use one of the two operators below, which set the outcome and the trigger rule.

    :param pulsar_conn_id: The Pulsar connection (the watcher's).
    """

    outcome: ClassVar[Outcome]
    default_trigger_rule: ClassVar[str]
    ui_color = "#e8f0ff"

    def __init__(self, *, pulsar_conn_id: str = PulsarHook.default_conn_name, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", self.default_trigger_rule)
        super().__init__(**kwargs)
        self.pulsar_conn_id = pulsar_conn_id

    def execute(self, context: Any) -> int:
        """Publish the notices and wait for their receipts; how many messages they name."""
        by_topic = notices_by_topic(event_payloads(context.get("triggering_asset_events")))
        run = f"{context['dag'].dag_id}/{context['run_id']}"
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            for topic, messages in by_topic.items():
                # One notice per watcher, so that its triggerer settles the run's messages at once.
                hook.create_producer(topic).send(SettleNotice(self.outcome, tuple(messages), run).encode())
        count = sum(len(messages) for messages in by_topic.values())
        self.log.info("Run %s: %s %d message(s) through %s", run, self.outcome, count, ", ".join(by_topic) or "no watcher")
        return count


class PulsarAcknowledgeRunMessagesOperator(PulsarSettleRunMessagesOperator):
    """
    Have the messages that started this run acknowledged: the run's last task, once all else succeeded.

    For assets watched by ``PulsarMessageEventTrigger(acknowledge="on_success", ...)``: the
    watcher acknowledges the messages of the run's events when this task has run. Its trigger
    rule is ``all_success`` (unless given): put it downstream of every task that handles them.
    Returns how many messages it named.

    :param pulsar_conn_id: The Pulsar connection (the watcher's).

    Example::

        handled = handle_orders()
        handled >> PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge")
        handled >> PulsarReleaseRunMessagesOperator(task_id="release")
    """

    outcome = "acknowledge"
    default_trigger_rule = "all_success"


class PulsarReleaseRunMessagesOperator(PulsarSettleRunMessagesOperator):
    """
    Have the messages that started this failed run delivered again, in a later event.

    The watcher negatively acknowledges them, so Pulsar redelivers them after its
    ``redelivery_delay`` (counting the redelivery towards ``max_redeliver_count``). Its trigger rule
    is ``one_failed`` (unless given): put it downstream of the tasks that handle the messages.
    Returns how many messages it named.

    :param pulsar_conn_id: The Pulsar connection (the watcher's).
    """

    outcome = "release"
    default_trigger_rule = "one_failed"
