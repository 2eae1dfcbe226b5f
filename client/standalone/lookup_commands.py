"""The lookup commands of one client connection: LOOKUP, PARTITIONED_METADATA,
GET_TOPICS_OF_NAMESPACE and GET_SCHEMA."""

from __future__ import annotations

from ..protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandGetSchema,
    CommandGetTopicsOfNamespace,
    CommandLookupTopic,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadata,
    CommandPartitionedTopicMetadataResponse,
    ServerError,
)
from ..topic_name import InvalidTopicNameError, TopicName
from .channel import Channel
from .service import TopicNotFoundError

T = BaseCommand
NON_PERSISTENT_REFUSED = "the embedded broker keeps every topic persistent; non-persistent topics are not served"


class LookupCommands:
    """Answers where a topic is served, how many partitions it has, and what a namespace holds."""

    def __init__(self, channel: Channel):
        self.channel = channel

    def _topic_or_refuse(
        self, body: CommandLookupTopic | CommandPartitionedTopicMetadata, response_type: int, failed: int
    ) -> TopicName | None:
        """Parse a lookup's topic; a bad name, or one in a namespace that does not exist, is
        answered in the response's own error fields, which is where the official client looks for
        it (not in an ERROR frame)."""
        try:
            name = TopicName.parse(body.topic, strict=False)
            self.channel.service.check_namespace(name)
            if name.persistent:
                return name
            # Refused for good (clients do not retry NotAllowedError), where Pulsar serves them.
            error, message = ServerError.NotAllowedError, f"{NON_PERSISTENT_REFUSED}: {name}"
        except InvalidTopicNameError as exc:
            error, message = ServerError.InvalidTopicName, str(exc)
        except TopicNotFoundError as exc:
            error, message = ServerError.TopicNotFound, str(exc)
        self.channel.send(response_type, request_id=body.request_id, response=failed, error=error, message=message)
        return None

    def on_lookup(self, body: CommandLookupTopic) -> None:
        """LOOKUP: every topic is served here, at this broker's service URL."""
        if self._topic_or_refuse(body, T.LOOKUP_RESPONSE, CommandLookupTopicResponse.Failed) is None:
            return
        channel = self.channel
        if body.advertised_listener_name:
            # This broker advertises no named listeners; Pulsar fails such a lookup, and clients retry it.
            channel.send(
                T.LOOKUP_RESPONSE,
                request_id=body.request_id,
                response=CommandLookupTopicResponse.Failed,
                error=ServerError.ServiceNotReady,
                message=f"the broker do not have {body.advertised_listener_name} listener",
            )
            return
        # A TLS broker serves pulsar+ssl:// only, which clients read from the Tls field.
        url_field = "brokerServiceUrlTls" if channel.service.config.tls else "brokerServiceUrl"
        channel.send(
            T.LOOKUP_RESPONSE,
            request_id=body.request_id,
            **{url_field: channel.service.service_url},
            response=CommandLookupTopicResponse.Connect,
            authoritative=True,
            proxy_through_service_url=False,
        )

    def on_partitioned_metadata(self, body: CommandPartitionedTopicMetadata) -> None:
        """PARTITIONED_METADATA: the partition count of a topic, 0 when it is not partitioned."""
        name = self._topic_or_refuse(
            body, T.PARTITIONED_METADATA_RESPONSE, CommandPartitionedTopicMetadataResponse.Failed
        )
        if name is None:
            return
        self.channel.send(
            T.PARTITIONED_METADATA_RESPONSE,
            request_id=body.request_id,
            partitions=self.channel.service.partitions_of(name),
            response=CommandPartitionedTopicMetadataResponse.Success,
        )

    def on_get_topics_of_namespace(self, body: CommandGetTopicsOfNamespace) -> None:
        """GET_TOPICS_OF_NAMESPACE: the namespace's topics; there are no non-persistent ones."""
        tenant, _, namespace = body.namespace.partition("/")
        topics = self.channel.service.list_topics(tenant, namespace)
        if body.mode == CommandGetTopicsOfNamespace.NON_PERSISTENT:
            topics = []
        self.channel.send(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=body.request_id, topics=topics, filtered=False)

    def on_get_schema(self, body: CommandGetSchema) -> None:
        """GET_SCHEMA: topics here carry raw bytes; Pulsar answers "no schema" the same way."""
        self.channel.send(
            T.GET_SCHEMA_RESPONSE,
            request_id=body.request_id,
            error_code=ServerError.TopicNotFound,
            error_message=f"no schema for topic {body.topic}",
        )
