"""The dead-letter policy: after how many redeliveries a message goes to which topic.

The official client's three forms: ``ConsumerDeadLetterPolicy`` as ``subscribe`` takes it, and
the core's ``DeadLetterPolicyBuilder`` and ``DeadLetterPolicy`` it wraps. What the consumer does
with the policy is :mod:`.dead_letter_processor`'s.
"""

from __future__ import annotations

from ..arguments import check_type, is_int

# Java's Integer.MAX_VALUE: no limit, as the official core sets it.
_UNLIMITED = 2**31 - 1


class DeadLetterPolicy:
    """A built dead-letter policy, as ``DeadLetterPolicyBuilder.build()`` returns it in the official core."""

    def __init__(self, max_redeliver_count: int, dead_letter_topic: str, initial_subscription_name: str):
        self._fields = (max_redeliver_count, dead_letter_topic, initial_subscription_name)

    def getMaxRedeliverCount(self) -> int:  # noqa: N802 - the official name
        """Deliveries after which a message goes to the dead-letter topic."""
        return self._fields[0]

    def getDeadLetterTopic(self) -> str:  # noqa: N802 - the official name
        """The dead-letter topic, "" for the default ``<topic>-<subscription>-DLQ``."""
        return self._fields[1]

    def getInitialSubscriptionName(self) -> str:  # noqa: N802 - the official name
        """The subscription created on the dead-letter topic first, "" for none."""
        return self._fields[2]


class DeadLetterPolicyBuilder:
    """Builds a :class:`DeadLetterPolicy` (``pulsar.DeadLetterPolicyBuilder``): each setter returns the builder."""

    def __init__(self) -> None:
        self._max_redeliver_count = _UNLIMITED  # the official core's default when none is set
        self._dead_letter_topic = ""
        self._initial_subscription_name = ""

    def maxRedeliverCount(self, max_redeliver_count: int) -> DeadLetterPolicyBuilder:  # noqa: N802 - the official name
        """Deliveries after which a message goes to the dead-letter topic (> 0)."""
        check_type(int, max_redeliver_count, "max_redeliver_count")
        self._max_redeliver_count = max_redeliver_count
        return self

    def deadLetterTopic(self, dead_letter_topic: str) -> DeadLetterPolicyBuilder:  # noqa: N802 - the official name
        """The dead-letter topic."""
        check_type(str, dead_letter_topic, "dead_letter_topic")
        self._dead_letter_topic = dead_letter_topic
        return self

    def initialSubscriptionName(self, initial_subscription_name: str) -> DeadLetterPolicyBuilder:  # noqa: N802 - the official name
        """A subscription to create on the dead-letter topic before anything is sent there."""
        check_type(str, initial_subscription_name, "initial_subscription_name")
        self._initial_subscription_name = initial_subscription_name
        return self

    def build(self) -> DeadLetterPolicy:
        """The policy; ValueError when the max redeliver count set is not above 0."""
        if self._max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be greater than 0")
        return DeadLetterPolicy(self._max_redeliver_count, self._dead_letter_topic, self._initial_subscription_name)


class ConsumerDeadLetterPolicy:
    """After ``max_redeliver_count`` redeliveries a message goes to ``dead_letter_topic``.

    The topic defaults to ``<topic>-<subscription>-DLQ``; ``initial_subscription_name`` is created
    on it first so that nothing published there is lost before someone subscribes.
    """

    def __init__(self, max_redeliver_count: int, dead_letter_topic: str | None = None, initial_subscription_name: str | None = None):
        if not is_int(max_redeliver_count) or max_redeliver_count < 1:
            raise ValueError(f"max_redeliver_count must be an int greater than 0, got {max_redeliver_count!r}")
        builder = DeadLetterPolicyBuilder().maxRedeliverCount(max_redeliver_count)
        if dead_letter_topic is not None:
            builder.deadLetterTopic(dead_letter_topic)
        if initial_subscription_name is not None:
            builder.initialSubscriptionName(initial_subscription_name)
        self._policy = builder.build()

    @property
    def max_redeliver_count(self) -> int:
        """Deliveries after which a message goes to the dead-letter topic."""
        return self._policy.getMaxRedeliverCount()

    @property
    def dead_letter_topic(self) -> str:
        """The dead-letter topic, "" for the default ``<topic>-<subscription>-DLQ``."""
        return self._policy.getDeadLetterTopic()

    @property
    def initial_subscription_name(self) -> str:
        """The subscription created on the dead-letter topic first, "" for none."""
        return self._policy.getInitialSubscriptionName()

    def policy(self) -> DeadLetterPolicy:
        """The underlying :class:`DeadLetterPolicy`, as the official ``policy()`` returns it."""
        return self._policy

    def __repr__(self) -> str:
        return f"ConsumerDeadLetterPolicy({self.max_redeliver_count}, {self.dead_letter_topic!r})"
