"""The settings of a subscription read for a user function, shared by the classes that take them.

The await-message sensor and trigger and the message event trigger take the same arguments and
keep them as attributes of the same names (the sensor templates some of them, and builds its
trigger from them). Enums are kept by name and the function by dotted path, so the values stay
plain JSON for the triggerer. The sensor checks its templated ones once rendered; a trigger is
built from rendered values and checks all at once. The message event trigger and the consume
operator also take a dead-letter policy as two plain arguments, checked here the same way for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_pulsar import arguments
from airflow_pulsar.client import ConsumerDeadLetterPolicy, ConsumerType
from airflow_pulsar.templated_arguments import ArgumentChecks

# Pulsar counts redeliveries only on these subscription types, and a dead-letter policy acts on the count.
_COUNTED_TYPES = (ConsumerType.Shared, ConsumerType.KeyShared)

# What the consume operator and the await-message sensor template: where they read and what they call.
TEMPLATE_FIELDS = ("topics", "topics_pattern", "subscription", "apply_function_args", "apply_function_kwargs", "pulsar_conn_id")


class MessageSourceSettings(ArgumentChecks):
    """Validated subscription settings as attributes; a bad argument raises ValueError naming it."""

    topics: list[str]
    topics_pattern: str | None
    subscription: str
    apply_function: str | None
    apply_function_args: Sequence[Any]
    apply_function_kwargs: dict[str, Any]
    subscription_type: str
    initial_position: str
    pulsar_conn_id: str

    def _set_message_source(
        self,
        *,
        topics: Any,
        subscription: Any,
        apply_function: Any,
        apply_function_args: Any,
        apply_function_kwargs: Any,
        subscription_type: Any,
        initial_position: Any,
        pulsar_conn_id: Any,
        topics_pattern: Any = None,
    ) -> None:
        topics, topics_pattern = arguments.topic_source(topics, topics_pattern)
        self.topics = [] if topics is None else self._argument("topics", topics, arguments.topic_list)
        self.topics_pattern = (
            None if topics_pattern is None else self._argument("topics_pattern", topics_pattern, arguments.topics_pattern)
        )
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.apply_function = arguments.function_reference(
            apply_function, "apply_function", optional=True, allow_callable=False
        )
        self.apply_function_args = self._argument("apply_function_args", apply_function_args, arguments.function_args)
        self.apply_function_kwargs = self._argument(
            "apply_function_kwargs", apply_function_kwargs, arguments.function_kwargs
        )
        self.subscription_type = arguments.consumer_type(subscription_type).name
        self.initial_position = arguments.initial_position(initial_position).name
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)


def dead_letter_arguments(
    dead_letter_topic: Any, max_redeliver_count: Any, subscription_type: Any
) -> tuple[str | None, int | None]:
    """``(dead_letter_topic, max_redeliver_count)`` checked; ``(None, None)`` when no policy is asked for.

    ``max_redeliver_count`` switches the policy on; ``dead_letter_topic`` alone is refused, and
    None means Pulsar's default ``<topic>-<subscription>-DLQ``. The subscription must be Shared or
    KeyShared: on the other types Pulsar does not count redeliveries, so nothing would ever move.
    """
    if max_redeliver_count is None:
        if dead_letter_topic is not None:
            raise ValueError(f"dead_letter_topic {dead_letter_topic!r} needs max_redeliver_count, which turns the policy on")
        return None, None
    count = arguments.positive_int(max_redeliver_count, "max_redeliver_count")
    if dead_letter_topic is not None:
        if arguments.is_template(dead_letter_topic):
            raise ValueError(f"dead_letter_topic is not templated, got {dead_letter_topic!r}")
        arguments.topic_name(dead_letter_topic, "dead_letter_topic")
    kind = arguments.consumer_type(subscription_type)
    if kind not in _COUNTED_TYPES:
        raise ValueError(
            f"max_redeliver_count needs a Shared or KeyShared subscription, got {kind.name}: "
            "Pulsar counts redeliveries only on those"
        )
    return dead_letter_topic, count


def dead_letter_policy(dead_letter_topic: str | None, max_redeliver_count: int | None) -> ConsumerDeadLetterPolicy | None:
    """The client's policy for arguments :func:`dead_letter_arguments` accepted; None for no policy."""
    if max_redeliver_count is None:
        return None
    return ConsumerDeadLetterPolicy(max_redeliver_count, dead_letter_topic)
