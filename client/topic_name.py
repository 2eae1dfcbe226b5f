"""Topic names: ``persistent://tenant/namespace/topic`` and the short forms Pulsar accepts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .exceptions import InvalidTopicName

PARTITION_SUFFIX = "-partition-"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"

# Pulsar allows letters, digits and -=:._ in tenant and namespace names.
_NAME_PART = re.compile(r"[-=:.\w]+", re.ASCII)
_DOMAINS = ("persistent", "non-persistent")


class InvalidTopicNameError(InvalidTopicName, ValueError):
    """A topic name that Pulsar would reject, with the reason; ``except InvalidTopicName`` catches
    it wherever a name is given, as with the official client."""


def is_valid_name_part(value: str) -> bool:
    """Whether ``value`` is a valid tenant or namespace name."""
    return _NAME_PART.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class TopicName:
    """A fully qualified topic name; ``partition`` is -1 unless it names one partition."""

    domain: str
    tenant: str
    namespace: str
    local_name: str
    partition: int = -1

    @classmethod
    def parse(cls, name: str, *, strict: bool = True) -> TopicName:
        """Parse a full or short topic name, raising InvalidTopicNameError with the reason.

        ``strict`` also refuses local names with surrounding blanks or control characters, which
        are almost always a mistake in a client; a broker (``strict=False``) takes any non-empty
        local name, as Pulsar's broker does.
        """
        if not isinstance(name, str) or not name:
            raise InvalidTopicNameError(f"invalid topic name {name!r}: empty")
        domain = "persistent"
        rest = name
        if "://" in name:
            domain, rest = name.split("://", 1)
            if domain not in _DOMAINS:
                raise InvalidTopicNameError(f"invalid topic name {name!r}: domain must be persistent or non-persistent")
        parts = rest.split("/")
        if "://" not in name and len(parts) == 1:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]]
        if len(parts) == 4:
            # The legacy form tenant/cluster/namespace/topic is not supported by Pulsar 2+ either.
            raise InvalidTopicNameError(f"invalid topic name {name!r}: the tenant/cluster/namespace form is not supported")
        if len(parts) != 3:
            raise InvalidTopicNameError(f"invalid topic name {name!r}: expected tenant/namespace/topic")
        tenant, namespace, local = parts
        for label, value in (("tenant", tenant), ("namespace", namespace)):
            if not is_valid_name_part(value):
                raise InvalidTopicNameError(f"invalid topic name {name!r}: bad {label} {value!r}")
        if not local or (strict and (local.strip() != local or any(c in local for c in "\n\r\0"))):
            raise InvalidTopicNameError(f"invalid topic name {name!r}: bad local name {local!r}")
        partition = -1
        base, sep, index = local.rpartition(PARTITION_SUFFIX)
        # Only a canonical decimal index names a partition, as in Pulsar ("-partition-01" does not).
        if sep and base and index.isascii() and index.isdigit() and str(int(index)) == index and int(index) < 2**31:
            partition = int(index)
        return cls(domain, tenant, namespace, local, partition)

    @property
    def namespace_name(self) -> str:
        """``tenant/namespace``."""
        return f"{self.tenant}/{self.namespace}"

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself when not a partition)."""
        if self.partition < 0:
            return self
        local = self.local_name[: self.local_name.rindex(PARTITION_SUFFIX)]
        return TopicName(self.domain, self.tenant, self.namespace, local)

    def partition_name(self, index: int) -> TopicName:
        """The name of partition ``index`` of this topic."""
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}", index)

    @property
    def persistent(self) -> bool:
        """Whether the topic is in the persistent domain."""
        return self.domain == "persistent"

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"
