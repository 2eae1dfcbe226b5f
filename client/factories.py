"""The client's factories with the official signatures: ``create_producer``, ``subscribe``, ``create_reader``,
``create_table_view``.

Each factory's options are declared once, in :mod:`.factory_options`, for this API and the asyncio
one: every official argument in the official position with the official default, so a call
written for ``pulsar.Client`` (positional or keyword) means the same here, then this client's own,
keyword only. The deliberate differences: ``schema=None`` stands for ``BytesSchema()``;
``batching_enabled=None`` means "on unless chunking is" (the official sync client's default is off).
The functions after the class open the consumers and readers of either API.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from .consumer import Consumer, Reader, create_reader, subscribe
from .factory_options import Api, ProducerOptions, ReaderOptions, SubscribeOptions, keywords
from .factory_signature import factory
from .producer import Producer, create_producer
from .protocol.message_id import MessageId
from .schema import Schema
from .schema.base import SchemaSource
from .services import ClientServices
from .table_view import TableView, create_table_view

__all__ = ["ClientFactories", "open_consumer", "open_reader"]


class FactoryHost(ClientServices, SchemaSource, Protocol):
    """The client, as its factories use it: services for what they create, schemas for consumers."""


class ClientFactories:
    """Producer, consumer and reader factories of :class:`~.client.Client`."""

    @factory(ProducerOptions, Api.SYNC)
    def create_producer(self: FactoryHost, topic: str, options: ProducerOptions) -> Producer:
        """A producer on ``topic`` (partitioned or not) sending values encoded by ``schema`` (default: bytes).

        As ``pulsar.Client.create_producer``; the options are :class:`~.factory_options.ProducerOptions`.
        """
        return create_producer(self, topic, options.config())

    @factory(SubscribeOptions, Api.SYNC)
    def subscribe(
        self: FactoryHost, topic: str | list[str] | re.Pattern[str], subscription_name: str, options: SubscribeOptions
    ) -> Consumer:
        """A consumer on a topic, a list of topics or a regex pattern, whose messages' ``value()`` decodes
        with ``schema`` (default: bytes).

        As ``pulsar.Client.subscribe``; the options are :class:`~.factory_options.SubscribeOptions`.
        """
        return open_consumer(self, topic, subscription_name, options)

    @factory(ReaderOptions, Api.SYNC)
    def create_reader(self: FactoryHost, topic: str, start_message_id: MessageId, options: ReaderOptions) -> Reader:
        """A reader from ``start_message_id`` decoding with ``schema`` (default: bytes), as
        ``pulsar.Client.create_reader``; the options are :class:`~.factory_options.ReaderOptions`."""
        return open_reader(self, topic, start_message_id, options)

    def create_table_view(
        self: FactoryHost, topic: str, subscription_name: str | None = None, schema: Schema[Any] | None = None
    ) -> TableView:
        """The latest value of every key of ``topic``, decoded with ``schema`` (default: bytes), kept up
        to date; as ``pulsar.Client.create_table_view``."""
        if isinstance(schema, Schema):  # anything else is refused, by name, with the other arguments
            schema.attach_client(self)
        return create_table_view(self, topic, subscription_name, schema)


def open_consumer(
    client: FactoryHost, topic: str | list[str] | re.Pattern[str], subscription_name: str, options: SubscribeOptions
) -> Consumer:
    """``subscribe`` of either API, to a topic, a list of topics or a compiled pattern."""
    if isinstance(options.schema, Schema):  # anything else is refused, by name, with the other settings
        options.schema.attach_client(client)
    return subscribe(client, topic, subscription_name, **keywords(options))


def open_reader(client: FactoryHost, topic: str, start_message_id: MessageId, options: ReaderOptions) -> Reader:
    """``create_reader`` of either API."""
    if isinstance(options.schema, Schema):  # anything else is refused, by name, with the other settings
        options.schema.attach_client(client)
    return create_reader(client, topic, start_message_id, **keywords(options))
