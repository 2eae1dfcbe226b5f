"""Namespaces, and the policies of namespaces and topics, as Pulsar keeps them (deduplication and
the schema policies).

Pulsar applies a topic's own policy, else its namespace's, else the broker's setting
(``brokerDeduplicationEnabled``; here ``--dedup``). Topic policies belong to the partitioned topic,
never to one partition, so every partition follows its partitioned topic's. Namespaces created
through the admin API are kept with their policies; ``public/default`` and ``pulsar/system``
always exist. Topics are created only in existing namespaces, as with Pulsar; a namespace that
holds topics from a data dir written before that rule counts as existing too.
"""

from __future__ import annotations

from typing import Any

from airflow_pulsar.client.topic_name import TopicName

from .schema_compatibility import DEFAULT_STRATEGY, SchemaCompatibilityStrategy
from .storage import Storage

__all__ = ["AUTO_UPDATE_SCHEMA", "DEDUPLICATION", "NAMESPACE_SCHEMA_STRATEGY", "TOPIC_SCHEMA_STRATEGY", "Policies"]

# Pulsar's field name, in namespace and topic policies alike.
DEDUPLICATION = "deduplicationEnabled"
# Pulsar's Policies.compaction_threshold: bytes a topic may grow by before it is compacted.
COMPACTION_THRESHOLD = "compaction_threshold"
# Pulsar's field names of the schema compatibility strategy: in a namespace's Policies, in TopicPolicies.
NAMESPACE_SCHEMA_STRATEGY = "schema_compatibility_strategy"
TOPIC_SCHEMA_STRATEGY = "schemaCompatibilityStrategy"
# Whether producers may register new schema versions (namespace policy; Pulsar's broker default is true).
AUTO_UPDATE_SCHEMA = "is_allow_auto_update_schema"
# As in Pulsar standalone: its default namespace, and the one its system topics live in.
_BUILT_IN = ("public/default", "pulsar/system")


class Policies:
    """The namespaces and the policies of namespaces and topics, stored durably."""

    def __init__(self, storage: Storage, broker_deduplication: bool):
        self._storage = storage
        self.broker_deduplication = broker_deduplication
        self._namespaces: dict[str, dict[str, Any]] = {}
        self._topics: dict[str, dict[str, Any]] = {}

    def load(self) -> None:
        """Read what the storage holds (before any topic is loaded)."""
        self._namespaces = {name: {} for name in _BUILT_IN}
        self._namespaces.update(self._storage.load_namespaces())
        self._topics = self._storage.load_topic_policies()

    # ---- namespaces ----

    def namespaces(self) -> set[str]:
        """The namespaces created (or built in), as ``tenant/namespace``."""
        return set(self._namespaces)

    async def create_namespace(self, namespace: str) -> bool:
        """Create a namespace without policies; False if it exists already."""
        if namespace in self._namespaces:
            return False
        self._namespaces[namespace] = {}
        await self._storage.save_namespace(namespace, {})
        return True

    async def delete_namespace(self, namespace: str) -> None:
        """Forget a namespace and its policies (a built-in one comes back at the next start, as
        Pulsar standalone creates its default namespace whenever it is missing)."""
        if self._namespaces.pop(namespace, None) is not None:
            await self._storage.delete_namespace(namespace)

    def namespace_policies(self, namespace: str) -> dict[str, Any]:
        """Every policy set on a namespace, by Pulsar's field names."""
        return dict(self._namespaces.get(namespace, {}))

    def namespace_policy(self, namespace: str, key: str) -> Any:
        """A namespace's policy value, None when unset."""
        return self._namespaces.get(namespace, {}).get(key)

    async def set_namespace_policy(self, namespace: str, key: str, value: Any) -> None:
        """Set (or with None remove) a namespace policy, creating the namespace's record if needed."""
        policies = self._namespaces.setdefault(namespace, {})
        _put(policies, key, value)
        await self._storage.save_namespace(namespace, policies)

    # ---- topics ----

    def topic_policy(self, topic: TopicName, key: str) -> Any:
        """A (non-partition) topic's own policy value, None when unset."""
        return self._topics.get(str(topic), {}).get(key)

    async def set_topic_policy(self, topic: TopicName, key: str, value: Any) -> None:
        """Set (or with None remove) a topic's own policy."""
        name = str(topic)
        policies = self._topics.setdefault(name, {})
        _put(policies, key, value)
        if not policies:
            del self._topics[name]
        await self._storage.save_topic_policies(name, policies)

    async def forget_topic(self, topic: TopicName) -> None:
        """Drop a deleted topic's policies, as Pulsar does when a topic is deleted."""
        if self._topics.pop(str(topic), None) is not None:
            await self._storage.save_topic_policies(str(topic), {})

    # ---- what applies ----

    def deduplication(self, topic: TopicName) -> bool:
        """Whether sends to ``topic`` (a partition or a whole topic) are deduplicated."""
        for value in (
            self.topic_policy(topic.base, DEDUPLICATION),
            self.namespace_policy(topic.namespace_name, DEDUPLICATION),
        ):
            if value is not None:
                return bool(value)
        return self.broker_deduplication

    def schema_compatibility_strategy(self, topic: TopicName) -> SchemaCompatibilityStrategy:
        """The strategy a topic's schemas are checked with: the topic's, else its namespace's (an
        UNDEFINED one does not count), else the broker's default, FULL."""
        for value in (
            self.topic_policy(topic.base, TOPIC_SCHEMA_STRATEGY),
            self.namespace_policy(topic.namespace_name, NAMESPACE_SCHEMA_STRATEGY),
        ):
            if value is not None and value != SchemaCompatibilityStrategy.UNDEFINED.value:
                return SchemaCompatibilityStrategy(value)
        return DEFAULT_STRATEGY

    def allow_auto_update_schema(self, topic: TopicName) -> bool:
        """Whether producers may add schema versions to ``topic`` (its namespace's policy)."""
        value = self.namespace_policy(topic.namespace_name, AUTO_UPDATE_SCHEMA)
        return True if value is None else bool(value)


def _put(policies: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        policies.pop(key, None)
    else:
        policies[key] = value
