"""The broker's registry: topics, partitioned-topic metadata, namespaces, and their lifecycle."""

from __future__ import annotations

import asyncio
import itertools
import secrets

from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName

from .authorization import Authorizer
from .compaction import Compaction, CompactionMonitor
from .config import BrokerConfig
from .data_dir import DataDirLock
from .ledger import Ledger
from .non_persistent import NonPersistentTopic
from .permissions import Permissions
from .policies import COMPACTION_THRESHOLD, Policies
from .schema_compatibility import IncompatibleSchemaError, SchemaData
from .schema_registry import SchemaRegistry, schema_id
from .storage import Storage
from .storage_faults import StorageFaultSwitch
from .tenants import Tenants
from .topic import Topic
from .transactions.coordinator import COORDINATOR_ASSIGN_TOPIC, TransactionCoordinators
from .transactions.log import CoordinatorLog
from .transactions.participants import TopicParticipants
from .transactions.pending_acks import load_pending_acks


class TopicNotFoundError(LookupError):
    """A topic that does not exist (and is not auto-created in that context)."""


class NamespaceNotFoundError(TopicNotFoundError):
    """A topic named in a namespace that does not exist; Pulsar's reason is "Namespace not found"."""

    def __init__(self) -> None:
        super().__init__("Namespace not found")


class TopicBusyError(ValueError):
    """A topic that cannot be deleted while clients are connected (unless forced)."""


class BrokerService:
    """Owns the storage and every loaded topic."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        # Before the database is opened: a second broker on the same data dir stops here.
        self._lock = DataDirLock.acquire(config.data_dir)
        faults = None if config.test_storage_fault_file is None else StorageFaultSwitch(config.test_storage_fault_file)
        self.storage = Storage(config.data_dir, fsync=config.fsync, max_bytes=config.max_storage_size, faults=faults)
        self.policies = Policies(self.storage, config.dedup)
        self.tenants = Tenants(self.storage)
        self.permissions = Permissions(self.policies)
        # None: every authenticated role may do anything (Pulsar without authorizationEnabled).
        self.authorization = (
            Authorizer(config.superuser_roles, self.tenants, self.permissions, self.tenant_exists)
            if config.authorization
            else None
        )
        self.schemas = SchemaRegistry(self.storage)
        self.topics: dict[str, Topic] = {}
        # Loaded on first use and kept while the broker runs; only their partition counts are stored.
        self.non_persistent: dict[str, NonPersistentTopic] = {}
        self.partitioned: dict[str, int] = {}
        self._ledger_ids: dict[str, int] = {}
        self._next_ledger_id = 1
        self._producer_names = itertools.count()
        # A fresh prefix per broker run keeps generated names unique across restarts.
        self._producer_prefix = f"standalone-{secrets.token_hex(3)}"
        self.service_url = ""
        self.web_service_url = ""
        self._compaction_monitor = CompactionMonitor(config.compaction_monitor_seconds, self._compactions)
        count = config.transaction_coordinators
        self.transactions = (
            TransactionCoordinators(count, CoordinatorLog(self.storage), TopicParticipants(self)) if count else None
        )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Load what the storage holds and start its writer."""
        self.storage.start(loop)
        self.policies.load()
        self.tenants.load()
        self.schemas.load()
        self.partitioned = self.storage.load_partitioned_topics()
        self._ledger_ids = self.storage.load_topics()
        self._next_ledger_id = max(self._ledger_ids.values(), default=0) + 1
        for name in self._ledger_ids:
            self._load(TopicName.parse(name, strict=False))
        if self.transactions is not None:
            self.transactions.start()
        self._compaction_monitor.start(loop)

    def _compactions(self) -> list[tuple[Compaction, int | None]]:
        """Each loaded topic's compaction, with the threshold of its namespace."""
        threshold = self.policies.namespace_policy
        return [(topic.compaction, threshold(topic.name.namespace_name, COMPACTION_THRESHOLD)) for topic in self.topics.values()]

    def close(self) -> None:
        """Stop the compaction monitor, flush and close the storage, then let go of the data dir."""
        self._compaction_monitor.stop()
        if self.transactions is not None:
            self.transactions.close()
        self.storage.close()
        self._lock.release()

    def new_producer_name(self) -> str:
        """A producer name unique across the broker's lifetimes."""
        return f"{self._producer_prefix}-{next(self._producer_names)}"

    def _load(self, name: TopicName) -> Topic:
        key = str(name)
        ledger_id = self._ledger_ids[key]
        ledger = Ledger(
            self.storage, ledger_id, self.storage.load_entry_index(ledger_id), entry_index=self.config.entry_index
        )
        topic = Topic(
            name,
            self.storage,
            ledger,
            dedup=self.policies.deduplication(name),
            cursors=self.storage.load_cursors(ledger_id),
            last_sequence_ids=self.storage.last_sequence_ids(ledger_id),
            limits=self.config.limits,
            transaction_entries=self.storage.load_transaction_entries(ledger_id),
            pending_acks=load_pending_acks(self.storage, ledger_id),
        )
        self.topics[key] = topic
        return topic

    def apply_policies(self) -> None:
        """Bring every loaded topic in line with the policies, after one changed."""
        for topic in self.topics.values():
            topic.set_deduplication(self.policies.deduplication(topic.name))

    def namespaces(self) -> set[str]:
        """Every namespace, as ``tenant/namespace``: created (or built in), or holding topics."""
        holding = {TopicName.parse(name, strict=False).namespace_name for name in (*self._ledger_ids, *self.partitioned)}
        return self.policies.namespaces() | holding

    def namespace_exists(self, namespace: str) -> bool:
        """Whether ``tenant/namespace`` was created (or built in) or already holds topics."""
        prefix = f"persistent://{namespace}/"
        return namespace in self.policies.namespaces() or any(
            name.startswith(prefix) for name in (*self._ledger_ids, *self.partitioned)
        )

    def tenant_names(self) -> set[str]:
        """Every tenant: created (or built in), or owning a namespace."""
        return self.tenants.names() | {namespace.partition("/")[0] for namespace in self.namespaces()}

    def tenant_exists(self, tenant: str) -> bool:
        """Whether ``tenant`` was created (or built in) or owns a namespace."""
        return tenant in self.tenant_names()

    def namespace_is_empty(self, namespace: str) -> bool:
        """Whether no topic, partition or partitioned topic lives in ``tenant/namespace``."""
        prefix = f"persistent://{namespace}/"
        return not any(name.startswith(prefix) for name in (*self._ledger_ids, *self.partitioned))

    def check_namespace(self, name: TopicName) -> None:
        """Raise NamespaceNotFoundError unless the topic's namespace exists."""
        if not self.namespace_exists(name.namespace_name):
            raise NamespaceNotFoundError()

    def partitions_of(self, name: TopicName) -> int:
        """Partition count of a partitioned topic, 0 for anything else; the coordinators' assign
        topic has one partition per coordinator (none with transactions off)."""
        if self.transactions is not None and str(name) == COORDINATOR_ASSIGN_TOPIC:
            return self.transactions.count
        return self.partitioned.get(str(name.base if name.partition < 0 else name), 0)

    async def get_topic(self, name: TopicName, create: bool = True) -> Topic:
        """The topic (or partition) ``name``, created durably if missing and ``create``."""
        if not name.persistent:
            raise InvalidTopicNameError(f"topic {name}: a non-persistent topic has no storage")
        key = str(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        self._check_loadable(name, create)
        if key not in self._ledger_ids:
            self.check_namespace(name)
            ledger_id = self._next_ledger_id
            self._next_ledger_id += 1
            self._ledger_ids[key] = ledger_id
            try:
                await self.storage.create_topic(key, ledger_id)
            except BaseException:
                # Not stored: entries under this ledger id would be lost at the next start.
                del self._ledger_ids[key]
                raise
        return self.topics.get(key) or self._load(name)

    def _check_loadable(self, name: TopicName, create: bool) -> None:
        """Refuse to load ``name`` when it is a partitioned topic (its partitions are the topics),
        a partition past the count, or missing and not to be created."""
        if str(name) in self.partitioned:
            raise InvalidTopicNameError(f"topic {name} is partitioned: use its partitions ({name}-partition-N)")
        if name.partition >= 0:
            partitions = self.partitioned.get(str(name.base), 0)
            if partitions and name.partition >= partitions:
                raise TopicNotFoundError(f"topic {name.base} has {partitions} partitions, not {name.partition + 1}")
        if not create:
            raise TopicNotFoundError(f"Topic {name} not found")

    async def open_topic(self, name: TopicName, create: bool = True) -> Topic | NonPersistentTopic:
        """The topic a producer or consumer names, of either domain (see get_topic)."""
        if name.persistent:
            return await self.get_topic(name, create)
        topic = self.non_persistent.get(str(name))
        if topic is None:
            self._check_loadable(name, create)
            self.check_namespace(name)
            topic = self.non_persistent[str(name)] = NonPersistentTopic(name, self.config.limits)
        return topic

    async def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Record a partitioned topic and create its partitions."""
        key = str(name)
        self.check_namespace(name)
        if name.partition >= 0:
            raise InvalidTopicNameError(f"{name} names a partition; give the partitioned topic's name")
        if key in self.topics or key in self.non_persistent:
            raise ValueError(f"topic {name} already exists as a non-partitioned topic")
        old = self.partitioned.get(key, 0)
        if partitions < old:
            raise ValueError(f"topic {name} has {old} partitions; the count can only grow")
        self.partitioned[key] = partitions
        await self.storage.set_partitions(key, partitions)
        if not name.persistent:
            return  # as Pulsar: a non-persistent partition comes into being when a client uses it
        for index in range(partitions):
            await self.get_topic(name.partition_name(index))
        if old:
            await self._subscribe_new_partitions(name, old, partitions)

    async def _subscribe_new_partitions(self, name: TopicName, old: int, partitions: int) -> None:
        """As Pulsar does when a topic gains partitions: the durable subscriptions of its first
        partition, each created at the end of every new partition, so that a consumer joining a new
        partition later finds every message published there since."""
        first = await self.get_topic(name.partition_name(0))
        subscriptions = [sub.cursor.name for sub in first.subscriptions.values() if sub.cursor.durable]
        for index in range(old, partitions):
            topic = await self.get_topic(name.partition_name(index))
            for subscription in subscriptions:
                if subscription not in topic.subscriptions:
                    saved = topic.subscription(subscription, 0, True, None).persist()
                    if saved is not None:
                        await saved

    async def delete_topic(self, name: TopicName, force: bool = False) -> None:
        """Delete a topic, or every partition of a partitioned one, with its data.

        With clients connected this raises TopicBusyError (nothing deleted), unless ``force``,
        which disconnects them first, as Pulsar does.
        """
        key = str(name)
        names = [name.partition_name(i) for i in range(self.partitioned[key])] if key in self.partitioned else [name]
        if key not in self.partitioned and key not in self._ledger_ids:
            raise TopicNotFoundError(f"Topic {name} not found")
        loaded = [topic for part in names if (topic := self.topics.get(str(part))) is not None]
        for topic in loaded:
            producers = len(topic.producers)
            consumers = sum(len(s.consumers) for s in topic.subscriptions.values())
            if (producers or consumers) and not force:
                raise TopicBusyError(
                    f"Topic has {producers + consumers} client connected Including {consumers} consumers, "
                    f"{producers} producers, and 0 replicators."
                )
        for topic in loaded:
            topic.disconnect_clients()
        for part in names:
            part_key = str(part)
            if part_key in self._ledger_ids:
                self.topics.pop(part_key, None)
                await self.storage.delete_topic(part_key, self._ledger_ids.pop(part_key))
        if key in self.partitioned:
            del self.partitioned[key]
            await self.storage.delete_partitioned(key)
        await self.policies.forget_topic(name)
        await self.permissions.forget_topic([name, *names])
        if name.partition < 0:  # as Pulsar: a topic's schema history goes with it, not with one partition
            await self.schemas.drop(schema_id(name))

    # ---- schemas ----

    async def add_schema(self, name: TopicName, schema: SchemaData) -> int:
        """The version of a producer's schema on ``name``, registered if new and allowed by the
        topic's compatibility strategy and its namespace's auto-update policy."""
        policies = self.policies
        return await self.schemas.add_schema(
            schema_id(name), schema, policies.schema_compatibility_strategy(name), policies.allow_auto_update_schema(name)
        )

    async def add_consumer_schema(self, topic: Topic | NonPersistentTopic, schema: SchemaData) -> None:
        """A consumer's schema, as Pulsar takes it: registered while the topic is idle (no schema,
        producer, consumer or data yet), otherwise checked against what the topic has."""
        sid = schema_id(topic.name)
        has_consumers = any(subscription.consumers for subscription in topic.subscriptions.values())
        has_data = isinstance(topic, Topic) and topic.ledger.total_bytes > 0
        if self.schemas.current(sid) is None and not topic.producers and not has_consumers and not has_data:
            await self.add_schema(topic.name, schema)
            return
        try:
            self.schemas.check_consumer(sid, schema, self.policies.schema_compatibility_strategy(topic.name))
        except LookupError:
            raise IncompatibleSchemaError(
                "Failed to add schema to an active topic with empty(BYTES) schema: "
                f"new schema type {schema.schema_type.name}"
            ) from None

    def list_topics(self, tenant: str, namespace: str) -> list[str]:
        """Every persistent topic (partitions included) in a namespace, sorted."""
        prefix = f"persistent://{tenant}/{namespace}/"
        return sorted(name for name in self._ledger_ids if name.startswith(prefix))

    def list_non_persistent_topics(self, tenant: str, namespace: str) -> list[str]:
        """Every non-persistent topic (partitions included) a client used in a namespace, sorted."""
        prefix = f"non-persistent://{tenant}/{namespace}/"
        return sorted(name for name in self.non_persistent if name.startswith(prefix))

    def list_partitioned_topics(self, tenant: str, namespace: str, domain: str = "persistent") -> list[str]:
        """Every partitioned topic of ``domain`` in a namespace, sorted."""
        prefix = f"{domain}://{tenant}/{namespace}/"
        return sorted(name for name in self.partitioned if name.startswith(prefix))
