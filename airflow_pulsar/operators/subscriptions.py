"""Operators that create, reset (seek) and delete a subscription through Pulsar's admin REST API.

None of them attaches a consumer: a DAG can place a subscription before the first message is
produced (so a backlog sensor has something to watch), rewind it to reprocess, and remove it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_pulsar import arguments, subscriptions
from airflow_pulsar.arguments import SubscriptionPosition
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.templated_arguments import TemplatedArguments


class _SubscriptionOperator(TemplatedArguments):
    """The topic, subscription and connection every subscription operator takes."""

    template_fields: Sequence[str] = ("topic", "subscription", "pulsar_conn_id")
    ui_color = "#e8f0ff"

    def __init__(self, *, topic: str, subscription: str, pulsar_conn_id: str = PulsarHook.default_conn_name, **kwargs: Any):
        super().__init__(**kwargs)
        self.topic = self._argument("topic", topic, arguments.topic_name)
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)

    def _rendered(self) -> tuple[str, str, PulsarHook]:
        """The topic, subscription and hook (the templated values were checked once rendered)."""
        return self.topic, self.subscription, PulsarHook(pulsar_conn_id=self.pulsar_conn_id)

    @staticmethod
    def _position(value: Any, name: str) -> SubscriptionPosition:
        """A position kept as written, read as its check read it."""
        return arguments.subscription_position(value, name)


class PulsarCreateSubscriptionOperator(_SubscriptionOperator):
    """
    Create a durable subscription on a topic, without attaching a consumer; idempotent.

    A subscription that already exists is left where it is and the task succeeds, saying so in
    its log. A topic that does not exist yet is created with the subscription, as Pulsar does; on
    a partitioned topic the subscription is created on every partition. Returns ``{"topic",
    "subscription", "created"}`` to XCom.

    :param topic: The topic (partitioned or not). Templated.
    :param subscription: The subscription name. Templated.
    :param initial_position: Where it starts: ``"earliest"`` (default: every message already on the
        topic is in its backlog), ``"latest"``, a message id (``MessageId`` or
        ``"ledger:entry[:partition[:batch]]"``; on a partitioned topic it must name the
        partition), or a publish time (a datetime, ISO 8601 text or ms since the epoch: the
        subscription is created at the earliest message and reset to the first one published
        at or after that time). Templated.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used). Templated.

    Example::

        PulsarCreateSubscriptionOperator(task_id="subscribe", topic="orders", subscription="warehouse")
    """

    template_fields: Sequence[str] = (*_SubscriptionOperator.template_fields, "initial_position")

    def __init__(self, *, initial_position: Any = "earliest", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # As written: the rendered template shows it so.
        self.initial_position = self._argument(
            "initial_position", initial_position, arguments.subscription_position, keep_as_written=True
        )

    def execute(self, context: Any) -> dict[str, Any]:
        """Create the subscription unless it exists."""
        topic, subscription, hook = self._rendered()
        position = self._position(self.initial_position, "initial_position")
        with hook:
            created = subscriptions.create_subscription(hook.get_admin(), topic, subscription, position)
        if created:
            self.log.info("Created subscription %r on %s at %s", subscription, topic, subscriptions.describe(position))
        else:
            self.log.info("Subscription %r already exists on %s: left as it is", subscription, topic)
        return {"topic": topic, "subscription": subscription, "created": created}


class PulsarResetSubscriptionOperator(_SubscriptionOperator):
    """
    Move (seek) an existing subscription to a position, as Pulsar's reset-cursor does.

    The subscription's consumers are disconnected first and resubscribe at the new position;
    everything after it is unacknowledged again (rewinding reprocesses, moving forward skips).
    Returns ``{"topic", "subscription", "position"}`` (the position in words) to XCom.

    :param topic: The topic (partitioned or not). Templated.
    :param subscription: The subscription to move; it must exist. Templated.
    :param to: ``"earliest"``, ``"latest"``, a message id (``MessageId`` or
        ``"ledger:entry[:partition[:batch]]"``; on a partitioned topic the id's partition is
        reset) or a publish time (a datetime, ISO 8601 text or ms since the epoch: the first
        message published at or after it, on every partition). Templated.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used). Templated.

    Example::

        PulsarResetSubscriptionOperator(
            task_id="replay_today", topic="orders", subscription="warehouse", to="{{ data_interval_start }}"
        )
    """

    template_fields: Sequence[str] = (*_SubscriptionOperator.template_fields, "to")

    def __init__(self, *, to: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.to = self._argument("to", to, arguments.subscription_position, keep_as_written=True)

    def execute(self, context: Any) -> dict[str, Any]:
        """Reset the subscription."""
        topic, subscription, hook = self._rendered()
        position = self._position(self.to, "to")
        with hook:
            subscriptions.reset_subscription(hook.get_admin(), topic, subscription, position)
        where = subscriptions.describe(position)
        self.log.info("Reset subscription %r on %s to %s", subscription, topic, where)
        return {"topic": topic, "subscription": subscription, "position": where}


class PulsarDeleteSubscriptionOperator(_SubscriptionOperator):
    """
    Delete a subscription (on every partition of a partitioned topic) and its backlog.

    Returns ``{"topic", "subscription", "deleted"}`` to XCom.

    :param topic: The topic (partitioned or not). Templated.
    :param subscription: The subscription to delete. Templated.
    :param force: Also when consumers are attached (they are disconnected); without it Pulsar
        refuses (HTTP 412) and the task fails.
    :param missing_ok: Succeed, saying so in the log, when the subscription or its topic does
        not exist (default True); False fails the task then.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used). Templated.
    """

    def __init__(self, *, force: bool = False, missing_ok: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.force = arguments.flag(force, "force")
        self.missing_ok = arguments.flag(missing_ok, "missing_ok")

    def execute(self, context: Any) -> dict[str, Any]:
        """Delete the subscription."""
        topic, subscription, hook = self._rendered()
        with hook:
            deleted = subscriptions.delete_subscription(hook.get_admin(), topic, subscription, self.force, self.missing_ok)
        if deleted:
            self.log.info("Deleted subscription %r on %s", subscription, topic)
        else:
            self.log.info("Subscription %r does not exist on %s: nothing to delete", subscription, topic)
        return {"topic": topic, "subscription": subscription, "deleted": deleted}
