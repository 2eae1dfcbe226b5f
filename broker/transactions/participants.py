"""The broker's topics as a coordinator's participants: a transaction's end reaches each partition's
transaction buffer and each subscription's pending acknowledgements (in Pulsar, the commands
END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION to the brokers that own them; here, calls)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from airflow_pulsar.client.topic_name import TopicName
from airflow_pulsar.client.transaction.ids import TxnId

from ..commit import Commit
from ..topic import Topic


class TopicSource(Protocol):
    """Where the topics are: the broker service."""

    topics: dict[str, Topic]

    async def get_topic(self, name: TopicName, create: bool = True) -> Topic:
        """The topic ``name``; raises LookupError if it does not exist and not ``create``."""
        ...


async def stored(commit: Commit) -> None:
    """Wait for an appended entry's commit; raise its storage error."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def settle(done: Commit) -> None:
        error = done.exception()
        if not future.done():
            future.set_result(None) if error is None else future.set_exception(error)

    commit.add_done_callback(settle)
    await future


class TopicParticipants:
    """Ends transactions on the broker's own topics."""

    def __init__(self, service: TopicSource):
        self.service = service

    async def _topic(self, name: str) -> Topic | None:
        try:
            return await self.service.get_topic(TopicName.parse(name, strict=False), create=False)
        except LookupError:  # deleted meanwhile: nothing of the transaction is left there
            return None

    async def end_on_partition(self, topic: str, txn: TxnId, commit: bool) -> None:
        """Append the transaction's marker on the partition, which then shows or hides its entries."""
        found = await self._topic(topic)
        if found is not None:
            await stored(found.transactions.end(txn, commit))

    async def end_on_subscription(self, topic: str, subscription: str, txn: TxnId, commit: bool) -> None:
        """Apply (commit) or release (abort) the subscription's acknowledgements held by the transaction."""
        found = await self._topic(topic)
        held = None if found is None else found.subscriptions.get(subscription)
        if held is None:
            return
        await asyncio.gather(*held.pending_acks.end(txn, commit))

    async def abort_unknown(self, known: set[TxnId]) -> None:
        """Abort what loaded partitions and subscriptions hold of a transaction not in ``known``."""
        for name, topic in list(self.service.topics.items()):
            for txn in topic.transactions.open_transactions() - known:
                await self.end_on_partition(name, txn, commit=False)
            for subscription in list(topic.subscriptions.values()):
                for txn in subscription.pending_acks.transactions() - known:
                    await self.end_on_subscription(name, subscription.name, txn, commit=False)
