"""Topic names: the short and full forms Pulsar accepts, partitions, and rejected names."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.topic_name import (
    DEFAULT_NAMESPACE,
    DEFAULT_TENANT,
    PARTITION_SUFFIX,
    InvalidTopicNameError,
    TopicName,
)

# ------------------------------------------------------------------------------------ valid names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders", "persistent://public/default/orders"),
        ("my-tenant/my-ns/orders", "persistent://my-tenant/my-ns/orders"),
        ("persistent://my-tenant/my-ns/orders", "persistent://my-tenant/my-ns/orders"),
        ("non-persistent://my-tenant/my-ns/orders", "non-persistent://my-tenant/my-ns/orders"),
        ("persistent://public/default/orders.v2_final", "persistent://public/default/orders.v2_final"),
        ("persistent://t=1:x.y/ns-2/a", "persistent://t=1:x.y/ns-2/a"),
    ],
)
def test_parse_and_format(name, expected):
    topic = TopicName.parse(name)
    assert str(topic) == expected
    # Parsing the full form gives the same value back.
    assert TopicName.parse(str(topic)) == topic


def test_short_name_uses_the_default_tenant_and_namespace():
    topic = TopicName.parse("orders")
    assert (topic.domain, topic.tenant, topic.namespace, topic.local_name) == (
        "persistent",
        DEFAULT_TENANT,
        DEFAULT_NAMESPACE,
        "orders",
    )
    assert topic.namespace_name == "public/default"
    assert topic.persistent
    assert topic.partition == -1


def test_three_part_short_name_is_persistent():
    topic = TopicName.parse("acme/ingest/events")
    assert (topic.domain, topic.tenant, topic.namespace, topic.local_name) == ("persistent", "acme", "ingest", "events")
    assert topic.namespace_name == "acme/ingest"


def test_full_name_fields():
    topic = TopicName.parse("non-persistent://acme/ingest/events")
    assert topic == TopicName("non-persistent", "acme", "ingest", "events")
    assert not topic.persistent
    assert topic.namespace_name == "acme/ingest"


def test_local_name_may_hold_characters_tenants_may_not():
    topic = TopicName.parse("persistent://public/default/a b?c#d%e")
    assert topic.local_name == "a b?c#d%e"


def test_topic_names_are_hashable_and_immutable():
    topic = TopicName.parse("orders")
    assert {topic: 1}[TopicName.parse("persistent://public/default/orders")] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.tenant = "other"  # type: ignore[misc]


# -------------------------------------------------------------------------------------- partitions


def test_partition_is_parsed_from_the_local_name():
    topic = TopicName.parse("persistent://public/default/orders-partition-3")
    assert topic.partition == 3
    assert topic.local_name == "orders-partition-3"
    assert str(topic) == "persistent://public/default/orders-partition-3"
    assert TopicName.parse("orders-partition-0").partition == 0
    assert TopicName.parse("orders-partition-12").partition == 12


def test_base_of_a_partition():
    topic = TopicName.parse("persistent://acme/ns/orders-partition-3")
    base = topic.base
    assert str(base) == "persistent://acme/ns/orders"
    assert base.partition == -1
    assert base.base is base
    # Only the last suffix is the partition.
    nested = TopicName.parse("orders-partition-1-partition-2")
    assert nested.partition == 2
    assert nested.base.local_name == "orders-partition-1"


def test_base_of_a_plain_topic_is_itself():
    topic = TopicName.parse("orders")
    assert topic.base is topic


def test_partition_name():
    topic = TopicName.parse("non-persistent://acme/ns/orders")
    p7 = topic.partition_name(7)
    assert str(p7) == "non-persistent://acme/ns/orders-partition-7"
    assert p7.partition == 7
    assert p7.base == topic
    assert TopicName.parse(str(p7)) == p7


@pytest.mark.parametrize(
    "local",
    [
        "orders-partition-",  # no index
        "orders-partition-x",  # not a number
        "orders-partition-1a",
        "orders-partition--1",  # negative (Java's parse gives -1 too)
        "-partition-3",  # nothing before the suffix
        "orders-partitions-3",
    ],
)
def test_names_that_only_look_like_partitions(local):
    topic = TopicName.parse(f"persistent://public/default/{local}")
    assert topic.partition == -1
    assert topic.base is topic
    assert topic.local_name == local


topic_chars = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=1, max_size=30)
name_part = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-=:._", min_size=1, max_size=20)


@given(
    st.sampled_from(["persistent", "non-persistent"]),
    name_part,
    name_part,
    topic_chars.filter(lambda s: PARTITION_SUFFIX not in s),
    st.integers(0, 10_000),
)
def test_partition_round_trip(domain, tenant, namespace, local, index):
    base = TopicName.parse(f"{domain}://{tenant}/{namespace}/{local}")
    assert (base.domain, base.tenant, base.namespace, base.local_name, base.partition) == (
        domain,
        tenant,
        namespace,
        local,
        -1,
    )
    partition = base.partition_name(index)
    assert partition.partition == index
    assert partition.base == base
    assert TopicName.parse(str(partition)) == partition
    assert str(partition) == f"{base}{PARTITION_SUFFIX}{index}"


# --------------------------------------------------------------------------------- invalid names


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        ("http://public/default/orders", "domain must be persistent or non-persistent"),
        ("Persistent://public/default/orders", "domain must be persistent or non-persistent"),
        ("://public/default/orders", "domain must be persistent or non-persistent"),
        ("persistent://public/default", "expected tenant/namespace/topic"),
        ("persistent://orders", "expected tenant/namespace/topic"),
        ("public/orders", "expected tenant/namespace/topic"),
        ("a/b/c/d/e", "expected tenant/namespace/topic"),
        ("persistent://public/cluster/default/orders", "the tenant/cluster/namespace form is not supported"),
        ("public/cluster/default/orders", "the tenant/cluster/namespace form is not supported"),
        ("persistent:///default/orders", "bad tenant ''"),
        ("persistent://pub lic/default/orders", "bad tenant 'pub lic'"),
        ("persistent://public/def@ult/orders", "bad namespace 'def@ult'"),
        ("persistent://public//orders", "bad namespace ''"),
        ("public/de/fault/orders/x", "expected tenant/namespace/topic"),
        ("persistent://public/default/", "bad local name ''"),
        ("persistent://public/default/ orders", "bad local name ' orders'"),
        ("persistent://public/default/orders ", "bad local name 'orders '"),
        ("persistent://public/default/or\nders", "bad local name"),
        ("persistent://public/default/or\x00ders", "bad local name"),
        ("public/default/", "bad local name ''"),
    ],
)
def test_invalid_names_say_why(name, reason):
    with pytest.raises(InvalidTopicNameError) as info:
        TopicName.parse(name)
    message = str(info.value)
    assert message.startswith(f"invalid topic name {name!r}: ")
    assert reason in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [None, 5, b"orders"])
def test_non_string_names_are_rejected(value):
    with pytest.raises(InvalidTopicNameError):
        TopicName.parse(value)  # type: ignore[arg-type]
