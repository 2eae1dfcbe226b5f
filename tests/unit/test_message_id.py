"""MessageId: official-client byte compatibility, ordering, immutability."""

from __future__ import annotations

import copy
import inspect
import pickle

import _pulsar
import pulsar
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import PulsarApi_pb2 as pb
from airflow_pulsar.client.protocol.message_id import MessageId

I64_MAX = 2**63 - 1

int64s = st.integers(min_value=-(2**63), max_value=I64_MAX)
int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)
# Small ranges make equal fields (and so the tie-breaking rules) common.
small = st.integers(min_value=-1, max_value=3)
# Positional order as in the official client: partition, ledger, entry, batch index, (batch size).
message_ids = st.builds(MessageId, int32s, int64s, int64s, int32s, int32s)
close_message_ids = st.builds(MessageId, small, small, small, small, st.integers(0, 3))

# (partition, ledger, entry, batch_index): the official constructor's positional order.
SAMPLE_IDS = [
    (-1, -1, -1, -1),
    (-1, 0, 0, -1),
    (0, 1, 2, -1),
    (3, 10, 20, 5),
    (-1, 5, 0, 0),
    (17, 123456789012, 987654321, 999),
    (-1, I64_MAX, I64_MAX, -1),
    (-1, 7, 8, 63),
    (2**31 - 1, 7, 8, 2**31 - 1),
    (-5, 7, 8, -7),
]


def official_of(mid: MessageId) -> pulsar.MessageId:
    return pulsar.MessageId(mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index())


# Byte compatibility with the official client.


@pytest.mark.parametrize("fields", SAMPLE_IDS, ids=str)
def test_positional_construction_matches_official_client(fields):
    # The same positional arguments build the same id: bytes, str and accessors.
    ours = MessageId(*fields)
    theirs = pulsar.MessageId(*fields)
    assert ours.serialize() == theirs.serialize()
    assert str(ours) == str(theirs)
    accessors = ("partition", "ledger_id", "entry_id", "batch_index")
    assert [getattr(ours, name)() for name in accessors] == [getattr(theirs, name)() for name in accessors]
    assert [getattr(ours, name)() for name in accessors] == list(fields)


@pytest.mark.parametrize("fields", SAMPLE_IDS, ids=str)
def test_keyword_construction_matches_official_client(fields):
    names = dict(zip(("partition", "ledger_id", "entry_id", "batch_index"), fields, strict=True))
    assert MessageId(**names).serialize() == pulsar.MessageId(**names).serialize()
    assert str(MessageId(**names)) == str(pulsar.MessageId(**names))


def test_partial_positional_and_default_construction_match_official_client():
    for args in [(), (2,), (2, 5), (2, 5, 7)]:
        assert MessageId(*args).serialize() == pulsar.MessageId(*args).serialize(), args
        assert str(MessageId(*args)) == str(pulsar.MessageId(*args)), args
    assert MessageId() == MessageId.earliest
    assert MessageId(ledger_id=4, entry_id=9).partition() == -1


def test_constructor_signature_matches_official_client():
    theirs = list(inspect.signature(pulsar.MessageId.__init__).parameters.values())[1:]
    ours = list(inspect.signature(MessageId.__init__).parameters.values())[1:]
    # Same names, order and defaults; we add batch_size at the end.
    assert [(p.name, p.default) for p in ours[: len(theirs)]] == [(p.name, p.default) for p in theirs]
    assert [(p.name, p.default) for p in ours[len(theirs) :]] == [("batch_size", 0)]


@pytest.mark.parametrize("fields", SAMPLE_IDS, ids=str)
def test_deserialize_official_bytes(fields):
    ours = MessageId.deserialize(pulsar.MessageId(*fields).serialize())
    assert (ours.partition(), ours.ledger_id(), ours.entry_id(), ours.batch_index()) == fields
    assert ours.batch_size() == 0
    assert ours.topic_name() is None


def test_batch_size_survives_the_official_client():
    # The official constructor cannot set a batch size; its deserialize keeps it.
    ours = MessageId(1, 3, 4, 2, 10)
    assert (ours.partition(), ours.ledger_id(), ours.entry_id(), ours.batch_index(), ours.batch_size()) == (
        1,
        3,
        4,
        2,
        10,
    )
    theirs = _pulsar.MessageId.deserialize(ours.serialize())
    assert theirs.serialize() == ours.serialize()
    assert MessageId.deserialize(theirs.serialize()).batch_size() == 10


def test_earliest_and_latest_match_official_client():
    assert MessageId.earliest.serialize() == pulsar.MessageId.earliest.serialize()
    assert MessageId.latest.serialize() == pulsar.MessageId.latest.serialize()
    assert str(MessageId.earliest) == str(pulsar.MessageId.earliest) == "(-1,-1,-1,-1)"
    assert MessageId.latest == MessageId(-1, I64_MAX, I64_MAX, -1)
    assert MessageId.earliest == MessageId(-1, -1, -1, -1)
    assert MessageId.earliest < MessageId(-1, 0, 0) < MessageId.latest


@given(int32s, int64s, int64s, int32s)
def test_serialize_matches_official_client_property(partition, ledger, entry, batch_index):
    ours = MessageId(partition, ledger, entry, batch_index)
    theirs = pulsar.MessageId(partition, ledger, entry, batch_index)
    assert ours.serialize() == theirs.serialize()
    assert str(ours) == str(theirs)
    assert MessageId.deserialize(theirs.serialize()) == ours


@given(close_message_ids, close_message_ids)
def test_ordering_agrees_with_official_client(a, b):
    oa = official_of(a)
    ob = official_of(b)
    assert (a == b) == (oa == ob)
    # Where the official client decides an order, we decide the same one; it
    # leaves ids that differ only by partition unordered, we order them by it.
    if oa < ob:
        assert a < b
    if ob < oa:
        assert b < a


# Ordering.


def test_whole_entry_sorts_before_its_batched_messages():
    assert (
        MessageId(ledger_id=1, entry_id=2)
        < MessageId(ledger_id=1, entry_id=2, batch_index=0)
        < MessageId(ledger_id=1, entry_id=2, batch_index=1)
    )
    assert MessageId(-1, 1, 2, 99) < MessageId(-1, 1, 3)


def test_partition_only_breaks_ties():
    assert MessageId(5, 1, 2, 0) < MessageId(0, 1, 2, 1)
    assert MessageId(9, 1, 2) < MessageId(0, 1, 3)
    assert MessageId(0, 1, 2) < MessageId(1, 1, 2)
    assert MessageId(0, 1, 2) != MessageId(1, 1, 2)


def test_batch_size_is_not_identity():
    assert MessageId(0, 1, 2, 3, batch_size=10) == MessageId(0, 1, 2, 3)
    assert hash(MessageId(0, 1, 2, 3, batch_size=10)) == hash(MessageId(0, 1, 2, 3))


@given(st.lists(close_message_ids, max_size=20))
def test_total_order_consistent_with_tuples(ids):
    def key(m):
        return (m.ledger_id(), m.entry_id(), m.batch_index(), m.partition())

    assert [key(m) for m in sorted(ids)] == sorted(key(m) for m in ids)
    for a in ids:
        for b in ids:
            assert (a == b) == (key(a) == key(b))
            assert (a < b) == (key(a) < key(b))
            assert (a <= b) == (key(a) <= key(b))
            assert (a > b) == (key(a) > key(b))
            assert (a >= b) == (key(a) >= key(b))
            if a == b:
                assert hash(a) == hash(b)


def test_comparison_with_other_types():
    assert MessageId(-1, 1, 2) != (-1, 1, 2, -1)
    with pytest.raises(TypeError):
        MessageId(-1, 1, 2) < (1, 2)  # noqa: B015


# Serialization.


@given(message_ids)
def test_serialize_round_trip(mid):
    back = MessageId.deserialize(mid.serialize())
    assert back == mid
    assert back.batch_size() == mid.batch_size()


def test_serialize_sets_only_non_default_fields():
    assert MessageId(-1, 1, 2).serialize() == b"\x08\x01\x10\x02"
    assert MessageId(0, 1, 2, -1).serialize() == b"\x08\x01\x10\x02\x18\x00"
    assert MessageId(-1, 1, 2, 0, 4).serialize() == b"\x08\x01\x10\x02\x20\x00\x30\x04"


@pytest.mark.parametrize("data", [b"\xff\xff", b"\x08\x01", b"\x10\x02", b"\x08"])
def test_deserialize_rejects_malformed_bytes(data):
    with pytest.raises(ValueError, match="not a serialized MessageId"):
        MessageId.deserialize(data)


def test_deserialize_accepts_bytearray_and_memoryview():
    raw = MessageId(1, 4, 5, 2).serialize()
    assert MessageId.deserialize(bytearray(raw)) == MessageId(1, 4, 5, 2)
    assert MessageId.deserialize(memoryview(b"--" + raw)[2:]) == MessageId(1, 4, 5, 2)


TOPIC = "persistent://public/default/orders-partition-1"


def test_deserialize_with_topic_like_the_official_client():
    raw = MessageId(1, 4, 5, 2).serialize()
    # The official client accepts the same call shape.
    pulsar.MessageId.deserialize(raw, topic=TOPIC)
    mid = MessageId.deserialize(raw, topic=TOPIC)
    assert mid.topic_name() == TOPIC
    assert MessageId.deserialize(raw, TOPIC).topic_name() == TOPIC
    assert MessageId.deserialize(raw).topic_name() is None
    assert MessageId(1, 4, 5, 2).topic_name() is None
    # The topic is a hint, not identity (as in the official client).
    assert mid == MessageId(1, 4, 5, 2)
    assert hash(mid) == hash(MessageId(1, 4, 5, 2))
    assert mid.serialize() == raw


def test_topic_survives_pickle_and_copy():
    mid = MessageId.deserialize(MessageId(1, 4, 5, 2, 8).serialize(), topic=TOPIC)
    for clone in (pickle.loads(pickle.dumps(mid)), copy.copy(mid), copy.deepcopy(mid)):
        assert clone == mid
        assert clone.topic_name() == TOPIC
        assert clone.batch_size() == 8
    with pytest.raises(AttributeError):
        mid._topic = "other"


def test_proto_helpers():
    data = MessageId(7, 9, 8, 6, 5).to_proto()
    assert (data.partition, data.ledgerId, data.entryId, data.batch_index, data.batch_size) == (7, 9, 8, 6, 5)
    assert MessageId.from_proto(data) == MessageId(7, 9, 8, 6)
    assert MessageId.from_proto(data).batch_size() == 5

    command = pb.CommandSeek(consumer_id=1, request_id=2)
    assert MessageId(-1, 3, 4).to_proto(command.message_id) is command.message_id
    assert command.HasField("message_id")
    assert not command.message_id.HasField("partition")


def test_from_proto_maps_uint64_wire_values_to_signed():
    data = pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1)
    assert MessageId.from_proto(data) == MessageId.earliest


# Value semantics.


def test_immutable_and_slotted():
    mid = MessageId(-1, 1, 2)
    with pytest.raises(AttributeError):
        mid._ledger_id = 5
    with pytest.raises(AttributeError):
        mid.anything = 5
    with pytest.raises(AttributeError):
        del mid._entry_id
    assert not hasattr(mid, "__dict__")
    assert mid.ledger_id() == 1


def test_hashable_pickle_and_copy():
    mid = MessageId(3, 1, 2, 4, 5)
    assert {mid: "x"}[MessageId(3, 1, 2, 4)] == "x"
    for clone in (pickle.loads(pickle.dumps(mid)), copy.copy(mid), copy.deepcopy(mid)):
        assert clone == mid
        assert (clone.partition(), clone.ledger_id(), clone.entry_id(), clone.batch_index()) == (3, 1, 2, 4)
        assert clone.batch_size() == 5
        assert clone.topic_name() is None


def test_repr_shows_every_field_and_evaluates_back():
    mid = MessageId(3, 1, 2, 4, 5)
    assert repr(mid) == "MessageId(partition=3, ledger_id=1, entry_id=2, batch_index=4, batch_size=5)"
    back = eval(repr(mid), {"MessageId": MessageId})  # noqa: S307
    assert back == mid and back.batch_size() == 5


def test_keyword_names_match_official_client():
    mid = MessageId(ledger_id=1, entry_id=2, partition=3, batch_index=4)
    theirs = pulsar.MessageId(partition=3, ledger_id=1, entry_id=2, batch_index=4)
    assert mid.serialize() == theirs.serialize()
    assert str(mid) == str(theirs) == "(1,2,3,4)"
