"""The limits the broker holds its clients to, so that one of them, abusive or broken, cannot take
the broker's memory or connections: Apache Pulsar's settings, with its names and its defaults
(``ServiceConfiguration`` of Pulsar 4.2), as command-line options in kebab case; 0 turns a
count limit off, as in Pulsar. One is the embedded broker's own: Pulsar reads any frame up to
``maxMessageSize`` before CONNECT, and the broker only a small one until the client has connected.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from airflow_pulsar.cli.command_line import non_negative_int, positive_int

KIB = 1024


@dataclass(frozen=True)
class ClientLimits:
    """What one consumer, subscription, connection, client address or topic may hold."""

    # Shared and Key_Shared durable subscriptions: a consumer is sent nothing more once this many
    # messages are out with it unacknowledged, until acknowledgements bring them to half.
    max_unacked_messages_per_consumer: int = 50_000
    # The same for all the consumers of one subscription together, resumed below half.
    max_unacked_messages_per_subscription: int = 4 * 50_000
    # SENDs of one connection awaiting their receipts: past this the broker stops reading the
    # connection, and reads again once half of them are answered.
    max_pending_publish_requests_per_connection: int = 1000
    broker_max_connections: int = 0
    broker_max_connections_per_ip: int = 0
    max_consumers_per_subscription: int = 0
    max_producers_per_topic: int = 0
    # Bytes written to a connection and not yet taken by its socket: above the high mark the
    # broker sends its consumers nothing and stops reading it, until the low mark is reached.
    pulsar_channel_write_buffer_high_water_mark: int = 64 * KIB
    pulsar_channel_write_buffer_low_water_mark: int = 32 * KIB
    # The largest frame read before CONNECT succeeds (CONNECT and AUTH_RESPONSE carry credentials:
    # a large OAuth2 or Kerberos token fits).
    max_handshake_frame_size: int = 64 * KIB


_HELP = {
    "max_unacked_messages_per_consumer": "Pulsar's maxUnackedMessagesPerConsumer: on a Shared or Key_Shared "
    "subscription, stop sending to a consumer holding this many unacknowledged messages until acknowledgements "
    "bring them to half; 0: no limit",
    "max_unacked_messages_per_subscription": "Pulsar's maxUnackedMessagesPerSubscription: the same for all the "
    "consumers of a Shared or Key_Shared subscription together (resumed below half); 0: no limit",
    "max_pending_publish_requests_per_connection": "Pulsar's maxPendingPublishRequestsPerConnection: stop reading "
    "a connection with this many sends awaiting their receipts, until half of them are answered",
    "broker_max_connections": "Pulsar's brokerMaxConnections: refuse connections beyond this many; 0: no limit",
    "broker_max_connections_per_ip": "Pulsar's brokerMaxConnectionsPerIp: refuse connections from one address "
    "beyond this many; 0: no limit",
    "max_consumers_per_subscription": "Pulsar's maxConsumersPerSubscription: refuse consumers beyond this many on "
    "one Shared, Key_Shared or Failover subscription (ConsumerBusy); 0: no limit",
    "max_producers_per_topic": "Pulsar's maxProducersPerTopic: refuse producers beyond this many on one topic "
    "(ProducerBusy); 0: no limit",
    "pulsar_channel_write_buffer_high_water_mark": "Pulsar's pulsarChannelWriteBufferHighWaterMark: above this many "
    "bytes waiting to be written to a connection, send its consumers nothing and stop reading it",
    "pulsar_channel_write_buffer_low_water_mark": "Pulsar's pulsarChannelWriteBufferLowWaterMark: resume a "
    "connection held by the high water mark once its waiting bytes are down to this",
    "max_handshake_frame_size": "the largest frame read from a client before its CONNECT succeeds (the broker's own "
    "limit: Pulsar reads up to --max-message-size)",
}
# Counts that must be positive: 0 would never resume reading, or never read a frame.
_POSITIVE = {"max_pending_publish_requests_per_connection", "pulsar_channel_write_buffer_high_water_mark",
             "max_handshake_frame_size"}  # fmt: skip


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one option per limit, ``--max-unacked-messages-per-consumer`` and so on."""
    defaults = ClientLimits()
    for field in fields(ClientLimits):
        parser.add_argument(
            "--" + field.name.replace("_", "-"),
            type=positive_int if field.name in _POSITIVE else non_negative_int,
            default=getattr(defaults, field.name),
            metavar="N",
            help=_HELP[field.name],
        )


def limits_from_arguments(args: argparse.Namespace) -> ClientLimits:
    """The limits the parsed options give."""
    return ClientLimits(**{field.name: getattr(args, field.name) for field in fields(ClientLimits)})
