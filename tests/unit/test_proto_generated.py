"""The committed PulsarApi_pb2 is fresh, and the schema carries Pulsar's wire numbers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_pulsar.client.protocol import PulsarApi_pb2 as pb

REPO = Path(__file__).resolve().parents[2]


def _load_generator():
    spec = importlib.util.spec_from_file_location("_pulsar_proto_generate", REPO / "proto" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()


def test_committed_module_matches_a_fresh_build():
    committed = (REPO / "client" / "protocol" / "PulsarApi_pb2.py").read_bytes()
    assert generate.generate() == committed, "stale PulsarApi_pb2.py: run python proto/generate.py"


def test_check_flag_reports_a_stale_module(tmp_path, monkeypatch):
    stale = tmp_path / "PulsarApi_pb2.py"
    stale.write_bytes(b"# stale\n")
    monkeypatch.setattr(generate, "TARGET", stale)
    assert generate.main(["--check"]) == 1
    assert generate.main([]) == 0
    assert generate.main(["--check"]) == 0


def test_check_command_line_passes_on_the_committed_module():
    result = subprocess.run(
        [sys.executable, str(REPO / "proto" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _number(message, field: str) -> int:
    return message.DESCRIPTOR.fields_by_name[field].number


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        (pb.BaseCommand, "type", 1),
        (pb.BaseCommand, "connect", 2),
        (pb.BaseCommand, "send", 6),
        (pb.BaseCommand, "message", 9),
        (pb.BaseCommand, "ack", 10),
        (pb.BaseCommand, "ping", 18),
        (pb.BaseCommand, "redeliverUnacknowledgedMessages", 20),
        (pb.BaseCommand, "lookupTopicResponse", 24),
        (pb.BaseCommand, "getLastMessageIdResponse", 30),
        (pb.BaseCommand, "ackResponse", 38),
        (pb.BaseCommand, "topicMigrated", 68),
        (pb.MessageMetadata, "compression", 8),
        (pb.MessageMetadata, "uncompressed_size", 9),
        (pb.MessageMetadata, "num_messages_in_batch", 11),
        (pb.MessageMetadata, "ordering_key", 18),
        (pb.MessageMetadata, "highest_sequence_id", 24),
        (pb.SingleMessageMetadata, "payload_size", 3),
        (pb.SingleMessageMetadata, "sequence_id", 8),
        (pb.CommandSubscribe, "subType", 3),
        (pb.CommandSubscribe, "initialPosition", 13),
        (pb.CommandSubscribe, "keySharedMeta", 17),
        (pb.CommandMessage, "ack_set", 4),
        (pb.CommandFlow, "messagePermits", 2),
        (pb.CommandConsumerStats, "consumer_id", 4),
        (pb.MessageIdData, "batch_size", 6),
        (pb.KeySharedMeta, "hashRanges", 3),
    ],
)
def test_field_numbers_are_pulsars(message, field, number):
    assert _number(message, field) == number


def test_enum_values_are_pulsars():
    assert pb.BaseCommand.CONNECT == 2
    assert pb.BaseCommand.SEND == 6
    assert pb.BaseCommand.GET_OR_CREATE_SCHEMA_RESPONSE == 40
    assert pb.BaseCommand.NEW_TXN == 50
    assert pb.BaseCommand.TOPIC_MIGRATED == 68
    assert dict(pb.CompressionType.items()) == {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}
    assert pb.ProducerFenced == 25
    assert pb.v20 == 20
    assert pb.CommandSubscribe.Key_Shared == 3
    assert pb.CommandSubscribe.Earliest == 1
    assert pb.CommandLookupTopicResponse.Connect == 1
    assert pb.CommandAck.Cumulative == 1


def test_defaults_are_pulsars():
    assert pb.MessageIdData().partition == -1
    assert pb.MessageIdData().batch_index == -1
    assert pb.MessageMetadata().num_messages_in_batch == 1
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandProducerSuccess().producer_ready is True
    assert pb.CommandSubscribe().durable is True
    assert pb.CommandSubscribe().force_topic_creation is True
    assert pb.CommandSend().num_messages == 1


def test_ping_encodes_as_on_the_wire():
    ping = pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing())
    # type=18 (field 1 varint), then field 18 as an empty length-delimited message.
    assert ping.SerializeToString() == b"\x08\x12\x92\x01\x00"


def test_unmodelled_command_still_parses_and_round_trips():
    # An END_TXN_ON_PARTITION command with its body in field 58, which we do not model.
    body = b"\x08\x07"  # request_id = 7
    wire = b"\x08\x3a" + b"\xd2\x03" + bytes([len(body)]) + body
    command = pb.BaseCommand.FromString(wire)
    assert command.type == pb.BaseCommand.END_TXN_ON_PARTITION
    assert command.IsInitialized()
    assert command.SerializeToString() == wire
