"""The lookup commands of one client connection: LOOKUP, PARTITIONED_METADATA,
GET_TOPICS_OF_NAMESPACE, and the schema registry's GET_SCHEMA and GET_OR_CREATE_SCHEMA."""

from __future__ import annotations

from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandGetOrCreateSchema,
    CommandGetSchema,
    CommandGetTopicsOfNamespace,
    CommandLookupTopic,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadata,
    CommandPartitionedTopicMetadataResponse,
    ServerError,
)
from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName

from .authorization import NamespaceOperation, TenantNotFoundError, TopicOperation
from .channel import Channel, Rejected, not_authorized, topic_refusal
from .schema_compatibility import IncompatibleSchemaError, InvalidSchemaError
from .schema_registry import schema_from_wire, schema_id, schema_to_wire, version_bytes, version_from_bytes
from .service import TopicNotFoundError

T = BaseCommand


class LookupCommands:
    """Answers where a topic is served, how many partitions it has, and what a namespace holds."""

    def __init__(self, channel: Channel):
        self.channel = channel

    def _topic_or_refuse(
        self, body: CommandLookupTopic | CommandPartitionedTopicMetadata, response_type: int, failed: int
    ) -> TopicName | None:
        """Parse a lookup's topic and authorize it (as Pulsar, before looking for its namespace);
        a bad name, a refusal, or a namespace that does not exist is answered in the response's
        own error fields, which is where the official client looks for it (not in an ERROR frame)."""
        lookup = response_type == T.LOOKUP_RESPONSE
        error: int
        try:
            name = TopicName.parse(body.topic, strict=False)
            refusal = topic_refusal(self.channel, name, TopicOperation.LOOKUP)
            if refusal is not None:
                raise not_authorized("Lookup" if lookup else "Get Partition Metadata", refusal)
            self.channel.service.check_namespace(name)
            return name
        except InvalidTopicNameError as exc:
            error, message = ServerError.InvalidTopicName, str(exc)
        except Rejected as exc:
            error, message = exc.error, str(exc)
        except TenantNotFoundError:
            # Pulsar's answers when a role that is no superuser names a tenant that does not exist.
            if lookup:
                error = ServerError.AuthorizationError
                message = f"Exception occurred while trying to authorize lookup: the tenant of {name} does not exist"
            else:
                error, message = ServerError.TopicNotFound, f"Tenant or namespace or topic does not exist: {name.namespace_name}"
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
        """GET_TOPICS_OF_NAMESPACE: the namespace's topics of the mode's domains (the non-persistent
        ones a client has used since the broker started, as Pulsar lists those loaded). With
        authorization, a role that is no tenant admin needs produce or consume on the namespace."""
        channel = self.channel
        authorizer = channel.service.authorization
        if authorizer is not None and channel.role is not None:
            try:
                refusal = authorizer.namespace_refusal(channel.role, body.namespace, NamespaceOperation.GET_TOPICS)
            except TenantNotFoundError:
                raise Rejected(
                    ServerError.AuthorizationError,
                    f"Exception occurred while trying to authorize GetTopicsOfNamespace: the tenant of {body.namespace} does not exist",
                ) from None
            if refusal is not None:
                raise not_authorized("GetTopicsOfNamespace", refusal)
        tenant, _, namespace = body.namespace.partition("/")
        service = channel.service
        modes = CommandGetTopicsOfNamespace
        topics = service.list_topics(tenant, namespace) if body.mode in (modes.PERSISTENT, modes.ALL) else []
        if body.mode in (modes.NON_PERSISTENT, modes.ALL):
            topics += service.list_non_persistent_topics(tenant, namespace)
        channel.send(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=body.request_id, topics=topics, filtered=False)

    def on_get_schema(self, body: CommandGetSchema) -> None:
        """GET_SCHEMA: a version of the topic's schema, or without one the newest (as with Pulsar,
        the marker of a deletion when the schema was deleted last: type NONE, no definition)."""
        channel = self.channel
        try:
            sid = schema_id(TopicName.parse(body.topic, strict=False))
            if not body.HasField("schema_version"):
                stored = channel.service.schemas.latest(sid)
            elif not body.schema_version:
                raise Rejected(ServerError.IncompatibleSchema, "Empty schema version")
            else:
                stored = channel.service.schemas.version(sid, version_from_bytes(body.schema_version))
        except InvalidTopicNameError as exc:
            self._schema_error(body.request_id, ServerError.InvalidTopicName, str(exc))
            return
        except Rejected as exc:
            self._schema_error(body.request_id, exc.error, str(exc))
            return
        except ValueError as exc:
            self._schema_error(body.request_id, ServerError.UnknownError, str(exc))
            return
        if stored is None:
            self._schema_error(body.request_id, ServerError.TopicNotFound, f"Topic not found or no-schema {body.topic}")
            return
        channel.send(
            T.GET_SCHEMA_RESPONSE,
            request_id=body.request_id,
            schema=schema_to_wire(sid, stored.schema),
            schema_version=version_bytes(stored.version),
        )

    def _schema_error(self, request_id: int, error: int, message: str) -> None:
        self.channel.send(T.GET_SCHEMA_RESPONSE, request_id=request_id, error_code=error, error_message=message)

    async def on_get_or_create_schema(self, body: CommandGetOrCreateSchema) -> None:
        """GET_OR_CREATE_SCHEMA: the version of a schema on an existing topic (or partition),
        registered as a producer's would be; an empty version for a schema of type NONE."""
        service = self.channel.service
        error: int | None = ServerError.TopicNotFound
        message = f"Topic not found {body.topic}"
        version = b""
        try:
            name = TopicName.parse(body.topic, strict=False)
            if str(name) in service.topics or str(name) in service.non_persistent:
                schema = schema_from_wire(body.schema)
                if schema.schema_type != SchemaType.NONE:
                    version = version_bytes(await service.add_schema(name, schema))
                error = None
        except InvalidTopicNameError as exc:
            error, message = ServerError.InvalidTopicName, str(exc)
        except (IncompatibleSchemaError, InvalidSchemaError) as exc:
            error, message = ServerError.IncompatibleSchema, str(exc)
        if error is None:
            self.channel.send(T.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=body.request_id, schema_version=version)
        else:
            self.channel.send(
                T.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=body.request_id, error_code=error, error_message=message
            )
