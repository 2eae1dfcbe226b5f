"""The broker's registry: topics, partitioned-topic metadata, namespaces, and their lifecycle."""

from __future__ import annotations

import asyncio
import itertools
import secrets

from ..topic_name import InvalidTopicNameError, TopicName
from .config import BrokerConfig
from .ledger import Ledger
from .storage import Storage
from .topic import Topic


class TopicNotFoundError(LookupError):
    """A topic that does not exist (and is not auto-created in that context)."""


class BrokerService:
    """Owns the storage and every loaded topic."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.storage = Storage(config.data_dir, fsync=config.fsync)
        self.topics: dict[str, Topic] = {}
        self.partitioned: dict[str, int] = {}
        self._ledger_ids: dict[str, int] = {}
        self._next_ledger_id = 1
        self._producer_names = itertools.count()
        # A fresh prefix per broker run keeps generated names unique across restarts.
        self._producer_prefix = f"standalone-{secrets.token_hex(3)}"
        self.service_url = ""
        self.web_service_url = ""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Load what the storage holds and start its writer."""
        self.storage.start(loop)
        self.partitioned = self.storage.load_partitioned_topics()
        self._ledger_ids = self.storage.load_topics()
        self._next_ledger_id = max(self._ledger_ids.values(), default=0) + 1
        for name in self._ledger_ids:
            self._load(TopicName.parse(name))

    def close(self) -> None:
        """Flush and close the storage."""
        self.storage.close()

    def new_producer_name(self) -> str:
        """A producer name unique across the broker's lifetimes."""
        return f"{self._producer_prefix}-{next(self._producer_names)}"

    def _load(self, name: TopicName) -> Topic:
        key = str(name)
        ledger_id = self._ledger_ids[key]
        ledger = Ledger(self.storage, ledger_id, self.storage.load_entry_index(ledger_id))
        topic = Topic(
            name,
            self.storage,
            ledger,
            dedup=self.config.dedup,
            cursors=self.storage.load_cursors(ledger_id),
            last_sequence_ids=self.storage.last_sequence_ids(ledger_id),
        )
        self.topics[key] = topic
        return topic

    def partitions_of(self, name: TopicName) -> int:
        """Partition count of a partitioned topic, 0 for anything else."""
        return self.partitioned.get(str(name.base if name.partition < 0 else name), 0)

    async def get_topic(self, name: TopicName, create: bool = True) -> Topic:
        """The topic (or partition) ``name``, created durably if missing and ``create``."""
        if not name.persistent:
            raise InvalidTopicNameError(f"topic {name}: only persistent topics are supported")
        key = str(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        if key in self.partitioned:
            raise InvalidTopicNameError(f"topic {name} is partitioned: use its partitions ({name}-partition-N)")
        if name.partition >= 0:
            partitions = self.partitioned.get(str(name.base), 0)
            if partitions and name.partition >= partitions:
                raise TopicNotFoundError(f"topic {name.base} has {partitions} partitions, not {name.partition + 1}")
        if not create:
            raise TopicNotFoundError(f"topic {name} does not exist")
        if key not in self._ledger_ids:
            ledger_id = self._next_ledger_id
            self._next_ledger_id += 1
            self._ledger_ids[key] = ledger_id
            await self.storage.create_topic(key, ledger_id)
        return self.topics.get(key) or self._load(name)

    async def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Record a partitioned topic and create its partitions."""
        key = str(name)
        if name.partition >= 0:
            raise InvalidTopicNameError(f"{name} names a partition; give the partitioned topic's name")
        if key in self.topics:
            raise ValueError(f"topic {name} already exists as a non-partitioned topic")
        old = self.partitioned.get(key, 0)
        if partitions < old:
            raise ValueError(f"topic {name} has {old} partitions; the count can only grow")
        self.partitioned[key] = partitions
        await self.storage.set_partitions(key, partitions)
        for index in range(partitions):
            await self.get_topic(name.partition_name(index))

    async def delete_topic(self, name: TopicName) -> None:
        """Delete a topic, or every partition of a partitioned one, with its data."""
        key = str(name)
        names = [name.partition_name(i) for i in range(self.partitioned[key])] if key in self.partitioned else [name]
        for part in names:
            part_key = str(part)
            if part_key not in self._ledger_ids:
                if part is name:
                    raise TopicNotFoundError(f"topic {name} does not exist")
                continue
            topic = self.topics.pop(part_key, None)
            if topic is not None and (topic.producers or any(s.consumers for s in topic.subscriptions.values())):
                self.topics[part_key] = topic
                raise ValueError(f"topic {part} has active producers or consumers")
            await self.storage.delete_topic(part_key, self._ledger_ids.pop(part_key))
        if key in self.partitioned:
            del self.partitioned[key]
            await self.storage.delete_partitioned(key)

    def list_topics(self, tenant: str, namespace: str) -> list[str]:
        """Every persistent topic (partitions included) in a namespace, sorted."""
        prefix = f"persistent://{tenant}/{namespace}/"
        return sorted(name for name in self._ledger_ids if name.startswith(prefix))

    def list_partitioned_topics(self, tenant: str, namespace: str) -> list[str]:
        """Every partitioned topic in a namespace, sorted."""
        prefix = f"persistent://{tenant}/{namespace}/"
        return sorted(name for name in self.partitioned if name.startswith(prefix))
