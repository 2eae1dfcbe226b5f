"""End-to-end encryption without a broker: entries the official client encrypted, our encryptor and
decryptor against each other, key readers, rotation and caching, and the consumer's failure actions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from airflow_pulsar.client import ConsumerCryptoFailureAction, CryptoKeyReader
from airflow_pulsar.client.consumer.ack_grouping import AckGroupingTracker
from airflow_pulsar.client.consumer.chunks import ChunkedMessageCollector
from airflow_pulsar.client.consumer.settings import ConsumerSettings
from airflow_pulsar.client.consumer.unacked_tracker import UnackedMessageTracker
from airflow_pulsar.client.consumer.unpacker import EntryUnpacker, StartFilter
from airflow_pulsar.client.crypto import EncryptionKeyInfo, MessageDecryptor, MessageEncryptor
from airflow_pulsar.client.crypto.ciphers import unwrap_data_key
from airflow_pulsar.client.exceptions import CryptoError
from airflow_pulsar.client.producer.batch_container import BatchContainer
from airflow_pulsar.client.producer.entry_builder import EntryBuilder
from airflow_pulsar.client.producer.message import OutgoingMessage
from airflow_pulsar.client.producer.stats import ProducerStats
from airflow_pulsar.client.protocol.batch import single_header
from airflow_pulsar.client.protocol.compression import CompressionType, decompress
from airflow_pulsar.client.protocol.frames import encode_entry, message_frame, split_entry
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandMessage, EncryptionKeys, MessageIdData, MessageMetadata
from airflow_pulsar.client.timer import Timer
from tests.support.producer_config import producer_config
from tests.support.security import write_key_pair

# A 1024-bit RSA key made for these vectors only; the official client (pulsar-client 3.13)
# encrypted the entries below for it under the key name "vector-key".
VECTOR_PRIVATE_KEY = b"""-----BEGIN PRIVATE KEY-----
MIICdQIBADANBgkqhkiG9w0BAQEFAASCAl8wggJbAgEAAoGBAK+lQ+dsJQ5nKnho
Lzkvp5I4E41XyQ0afCfCRgDy5gUCHY+QTQPCsgRpCSxMNPtnR8vq80q7G9b031KD
+vGuLu+m2oH4wicysxm5M/WOgaTHVvCCE1xsZStkDxX4GZJNWfOpqeCICcVrdDw+
oWThBhd23z6sv8sqEiXClRF8etd/AgMBAAECgYAvSaMabvcbBZNdj08HalkG+Knq
57NtH7BFU/xczQg4WPV0bTkOxh//J/gcQPgSpx+hOsP9XpqEKLDnGjk5T9e6otoJ
uO/hQkg7sbcNNgE8xLGLhx2oe4XS7p9AX9/WYWdA6qZZLB/UhawMRihOJZXtBY2M
mUdiFyvaX4jntdS/YQJBAOifdaNu96qowJ6CmbMp7K13diNnxcUloqNs91aR8UmH
EeXQb54Z3RWfGvvIpXCXa9pu9I7ZJvG7lUSw+Rv34OUCQQDBS/yP6zXEm+78ICqg
V4E6dL7JF6igqBSsLDQeA/gNUW0kQlDmUwZgYw883EicTpikAQ9XtK5W5TI/vn+V
qqSTAkAaTw6K8V3pWzSNuM+RR8iQxdYCoxXm+h6uxQAkNlVHr5MCntRA2UP70gbH
OyYa2cVE6w+VqFGTPVfgcPN7iklRAkApMpjR07/R96on8nMjWYMhgmBnW7OFCk3d
pE43V4E21XP9lmTHskpZoMNOpWSUa+v8iH1MpCXEP3VGQMPQkl4hAkAeLC37bS3j
DfxE498PZ3X3Gcw3QK29jBW56a19ycsY2IEAzW74qrbKYcvXCGZg4mf+oN89c4YI
dkMnq/UsRpp0
-----END PRIVATE KEY-----
"""
# One message, ZLIB-compressed, then encrypted.
SINGLE = {
    "wrapped": "af39ce69d542fb3d8799d19aeae3fad1bdc0115d66fbca5faa08226f0d6050ab8d990e64528c704d58cfa683c1f38caf"
    "8856686f6b972ae1464b97c15176b88f01624444c7187fc4073f497d39285056874ca5b3e9d09baf7625fae5c79e02d155"
    "076521cad8b696e2779065bd2063eafd90ad6761e6ac9af7a4181822b3e1c1",
    "iv": "6b67f1fd3e9b5fa3f4854039",
    "payload": "a9ed48b904f06051084a94e083b117d62541ce8ce603eba5b03565571fbbc2a5e7807ce5f35c4e8120523889f268b6263081"
    "2996798b8ab4c6e67059e2efb291cc3c3d",
}
SINGLE_TEXT = b"end-to-end encrypted by the official client"
# A batch of three messages, uncompressed, encrypted as one payload.
BATCH = {
    "wrapped": "8f994896ab2b39bd576bffd64205c47645bea3baf1a8361980519e94751900f95d2a08cb421b19b932aae260da431d1b"
    "d74cc408bc03642f5ebb0807914d23990f19376dcaf68ffc18bcd7523593bc2c22ad58eb9182091b15b254361f0bdf9ffafe"
    "5d9da915622ad3beced4b501bc8bd3558395a24fde298b933790e5621444",
    "iv": "69867f3bafc51a9c75b2d881",
    "payload": "0e58eb2cac5074c8a02bf840bed66c56cbde8dd081e7684e47746865a2320d17d748d4fdd46f7d0b6f9c74534d9eb4d3fbdf36"
    "dc55e2f60c",
}
TIMER = Timer("crypto-test-timer")


class MappedKeys:
    """A key reader with PEM keys by name, counting what it is asked for."""

    def __init__(self, public: Mapping[str, bytes], private: Mapping[str, bytes], metadata: Mapping[str, str] | None = None):
        self.public, self.private, self.metadata = public, private, dict(metadata or {})
        self.asked: list[tuple[str, str, dict[str, str]]] = []

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.asked.append(("public", key_name, dict(metadata)))
        return EncryptionKeyInfo(self.public[key_name], self.metadata)

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.asked.append(("private", key_name, dict(metadata)))
        if key_name not in self.private:
            raise KeyError(key_name)
        return EncryptionKeyInfo(self.private[key_name])


def pem_pair(directory: Path, name: str, kind: str = "rsa") -> tuple[bytes, bytes]:
    """(public PEM, private PEM) of a fresh key pair."""
    pair = write_key_pair(directory, name, kind)
    return pair.public.read_bytes(), pair.private.read_bytes()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return pem_pair(tmp_path_factory.mktemp("keys"), "pair")


@pytest.fixture(scope="module")
def other_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return pem_pair(tmp_path_factory.mktemp("keys"), "other")


def keys_for(*pairs: tuple[str, tuple[bytes, bytes]]) -> MappedKeys:
    return MappedKeys({name: p[0] for name, p in pairs}, {name: p[1] for name, p in pairs})


def vector_metadata(vector: dict[str, str], **fields: object) -> MessageMetadata:
    metadata = MessageMetadata(producer_name="standalone-0-0", sequence_id=0, publish_time=1, **fields)  # type: ignore[arg-type]
    metadata.encryption_keys.append(EncryptionKeys(key="vector-key", value=bytes.fromhex(vector["wrapped"])))
    metadata.encryption_param = bytes.fromhex(vector["iv"])
    return metadata


def vector_reader() -> MappedKeys:
    return MappedKeys({}, {"vector-key": VECTOR_PRIVATE_KEY})


# ---- entries the official client encrypted ----


def test_decrypts_a_compressed_message_of_the_official_client() -> None:
    metadata = vector_metadata(SINGLE, compression=CompressionType.ZLIB, uncompressed_size=len(SINGLE_TEXT))
    plain = MessageDecryptor(vector_reader()).decrypt(metadata, bytes.fromhex(SINGLE["payload"]))
    assert plain is not None
    assert decompress(CompressionType.ZLIB, plain, len(SINGLE_TEXT)) == SINGLE_TEXT


def test_unpacks_a_batch_the_official_client_encrypted() -> None:
    metadata = vector_metadata(BATCH, num_messages_in_batch=3)
    entry = encode_entry(metadata, bytes.fromhex(BATCH["payload"]))
    messages, permits = unpacker(vector_reader()).unpack(None, 0, message_frame(command(1), entry))
    assert [m.data() for m in messages] == [b"first", b"second", b"third"] and permits == 3
    context = messages[0].encryption_context()
    assert context is not None and not context.is_decryption_failed()
    assert (context.batch_size(), context.param().hex(), context.keys()[0].key) == (3, BATCH["iv"], "vector-key")


def test_a_vector_altered_by_one_bit_fails_authentication() -> None:
    payload = bytearray.fromhex(SINGLE["payload"])
    payload[3] ^= 1
    assert MessageDecryptor(vector_reader()).decrypt(vector_metadata(SINGLE), payload) is None


# ---- our encryptor and decryptor ----


def test_round_trip_reuses_the_wrapped_data_key_with_a_fresh_iv(pair: tuple[bytes, bytes]) -> None:
    reader = keys_for(("k1", pair))
    encryptor = MessageEncryptor(["k1"], reader)
    first, first_fields = encryptor.encrypt(b"payload one")
    second, second_fields = encryptor.encrypt(b"payload one")
    one, two = MessageMetadata.FromString(first_fields), MessageMetadata.FromString(second_fields)
    assert one.encryption_keys == two.encryption_keys and len(one.encryption_keys[0].value) == 256
    assert one.encryption_param != two.encryption_param and len(one.encryption_param) == 12
    assert not one.HasField("encryption_algo")  # neither official client names the algorithm
    assert len(first) == len(b"payload one") + 16 and first != second
    decryptor = MessageDecryptor(reader)
    assert decryptor.decrypt(one, first) == decryptor.decrypt(two, second) == b"payload one"
    assert [a[0] for a in reader.asked] == ["public", "private"]  # one unwrap serves both entries
    assert encryptor.overhead == len(first_fields) + 16


def test_each_key_name_gets_its_wrapped_copy_and_its_metadata(pair: tuple[bytes, bytes], other_pair: tuple[bytes, bytes]) -> None:
    producer_keys = MappedKeys({"old": pair[0], "new": other_pair[0]}, {}, metadata={"version": "7"})
    payload, fields = MessageEncryptor(["old", "new"], producer_keys).encrypt(b"for two readers")
    metadata = MessageMetadata.FromString(fields)
    assert [k.key for k in metadata.encryption_keys] == ["old", "new"]
    assert all({kv.key: kv.value for kv in k.metadata} == {"version": "7"} for k in metadata.encryption_keys)
    only_new = MappedKeys({}, {"new": other_pair[1]})
    assert MessageDecryptor(only_new).decrypt(metadata, payload) == b"for two readers"
    # "old" was tried first and failed; "new" got the metadata the producer's reader gave.
    assert only_new.asked == [("private", "old", {"version": "7"}), ("private", "new", {"version": "7"})]


def test_the_data_key_rotates_after_its_lifetime(pair: tuple[bytes, bytes]) -> None:
    now = [0.0]
    encryptor = MessageEncryptor(["k1"], keys_for(("k1", pair)), lifetime_seconds=100, clock=lambda: now[0])
    before = MessageMetadata.FromString(encryptor.encrypt(b"x")[1]).encryption_keys[0].value
    now[0] = 99.0
    assert MessageMetadata.FromString(encryptor.encrypt(b"x")[1]).encryption_keys[0].value == before
    now[0] = 100.0
    assert MessageMetadata.FromString(encryptor.encrypt(b"x")[1]).encryption_keys[0].value != before


def test_a_failed_rotation_keeps_the_current_data_key(pair: tuple[bytes, bytes]) -> None:
    now = [0.0]
    reader = keys_for(("k1", pair))
    encryptor = MessageEncryptor(["k1"], reader, lifetime_seconds=100, clock=lambda: now[0])
    payload, fields = encryptor.encrypt(b"x")
    reader.public = {"k1": b"not a key"}
    now[0] = 200.0
    rotated_payload, rotated_fields = encryptor.encrypt(b"still encrypted")
    assert MessageMetadata.FromString(rotated_fields).encryption_keys == MessageMetadata.FromString(fields).encryption_keys
    assert MessageDecryptor(reader).decrypt(MessageMetadata.FromString(rotated_fields), rotated_payload) == b"still encrypted"


def test_unwrapped_data_keys_unused_for_their_lifetime_are_forgotten(pair: tuple[bytes, bytes]) -> None:
    now = [0.0]
    reader = keys_for(("k1", pair))
    decryptor = MessageDecryptor(reader, lifetime_seconds=100, clock=lambda: now[0])
    for _ in range(3):  # three producers, three data keys
        payload, fields = MessageEncryptor(["k1"], reader).encrypt(b"m")
        assert decryptor.decrypt(MessageMetadata.FromString(fields), payload) == b"m"
    assert decryptor.cached_data_keys == 3
    now[0] = 150.0
    payload, fields = MessageEncryptor(["k1"], reader).encrypt(b"m")
    decryptor.decrypt(MessageMetadata.FromString(fields), payload)
    assert decryptor.cached_data_keys == 1


def test_a_wrong_private_key_or_a_failing_reader_decrypts_nothing(pair: tuple[bytes, bytes], other_pair: tuple[bytes, bytes]) -> None:
    payload, fields = MessageEncryptor(["k1"], keys_for(("k1", pair))).encrypt(b"secret")
    metadata = MessageMetadata.FromString(fields)
    assert MessageDecryptor(keys_for(("k1", other_pair))).decrypt(metadata, payload) is None
    assert MessageDecryptor(MappedKeys({}, {})).decrypt(metadata, payload) is None  # the reader raises KeyError


# ---- keys and readers ----


def test_crypto_key_reader_reads_its_files_for_every_name(tmp_path: Path, pair: tuple[bytes, bytes]) -> None:
    (tmp_path / "pub.pem").write_bytes(pair[0])
    (tmp_path / "priv.pem").write_bytes(pair[1])
    reader = CryptoKeyReader(str(tmp_path / "pub.pem"), str(tmp_path / "priv.pem"))
    payload, fields = MessageEncryptor(["any", "name"], reader).encrypt(b"files")
    assert MessageDecryptor(reader).decrypt(MessageMetadata.FromString(fields), payload) == b"files"
    with pytest.raises(ValueError, match="public_key_path .* 'str' and not 'int'"):
        CryptoKeyReader(1, "x")  # type: ignore[arg-type]


def test_unusable_public_keys_fail_every_send_until_they_work(tmp_path: Path, pair: tuple[bytes, bytes]) -> None:
    missing = CryptoKeyReader(str(tmp_path / "nowhere.pem"), str(tmp_path / "nowhere.pem"))
    encryptor = MessageEncryptor(["k1"], missing)  # made anyway, as the official producer is
    with pytest.raises(CryptoError, match="cannot read the public key file .*nowhere.pem.* for key 'k1'"):
        encryptor.check_ready()
    (tmp_path / "nowhere.pem").write_bytes(pair[0])
    encryptor.check_ready()
    assert len(encryptor.encrypt(b"now")[0]) == 3 + 16


def test_ec_keys_are_refused_by_name_as_the_cpp_client_cannot_use_them(tmp_path: Path) -> None:
    public, private = pem_pair(tmp_path, "ec", kind="ec")
    with pytest.raises(CryptoError, match="public key of 'ec' is an EC key: only RSA keys are supported"):
        MessageEncryptor(["ec"], MappedKeys({"ec": public}, {})).check_ready()
    with pytest.raises(CryptoError, match="private key of 'ec' is an EC key"):
        unwrap_data_key("ec", private, b"\0" * 256)
    with pytest.raises(CryptoError, match="'garbled' is not a PEM public key"):
        MessageEncryptor(["garbled"], MappedKeys({"garbled": b"-----BEGIN PUBLIC KEY-----\nAAAA\n"}, {})).check_ready()


# ---- settings ----


def test_producer_settings_check_the_encryption_arguments(pair: tuple[bytes, bytes]) -> None:
    reader = keys_for(("k1", pair))
    assert producer_config(encryption_key="k1", crypto_key_reader=reader).encryption_key == ("k1",)
    assert producer_config(encryption_key=["a", "b", "a"], crypto_key_reader=reader).encryption_key == ("a", "b")
    assert not producer_config(encryption_key="", crypto_key_reader=reader).encrypted
    with pytest.raises(ValueError, match=r"encryption_key \['k1'\] needs a crypto_key_reader"):
        producer_config(encryption_key="k1")
    with pytest.raises(ValueError, match="encryption_key must be a key name"):
        producer_config(encryption_key=5, crypto_key_reader=reader)
    with pytest.raises(ValueError, match="crypto_key_reader must be a CryptoKeyReader"):
        producer_config(encryption_key="k1", crypto_key_reader="keys.pem")


def test_consumer_settings_take_the_official_failure_action_enum() -> None:
    import pulsar

    settings = ConsumerSettings("sub", crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME)
    assert settings.crypto_failure_action is ConsumerCryptoFailureAction.CONSUME
    assert [(a.name, a.value) for a in ConsumerCryptoFailureAction] == [
        (name, int(member)) for name, member in pulsar.ConsumerCryptoFailureAction.__members__.items()
    ]
    with pytest.raises(ValueError, match="crypto_failure_action is expected to be a ConsumerCryptoFailureAction"):
        ConsumerSettings("sub", crypto_failure_action="drop")


# ---- entries built and unpacked ----


def builder(reader: MappedKeys, compression: CompressionType = CompressionType.NONE, max_size: int = 5 << 20) -> EntryBuilder:
    made = EntryBuilder(compression, True, ProducerStats(), encryptor=MessageEncryptor(["k1"], reader))
    made.connected("producer-1", max_size)
    return made


def unpacker(reader: MappedKeys | None, action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL) -> EntryUnpacker:
    acks = AckGroupingTracker(lambda pending: True, TIMER, group_time=3600)
    unacked = UnackedMessageTracker(3_600_000, TIMER, lambda ids: None)
    settings = ConsumerSettings("sub", crypto_key_reader=reader, crypto_failure_action=action)
    return EntryUnpacker("t", 0, acks, ChunkedMessageCollector(), StartFilter(None, False), None, settings, unacked)


def command(entry: int) -> CommandMessage:
    return CommandMessage(consumer_id=1, message_id=MessageIdData(ledgerId=5, entryId=entry))


def test_a_batch_is_compressed_then_encrypted_as_one_payload(pair: tuple[bytes, bytes]) -> None:
    reader = keys_for(("k1", pair))
    container = BatchContainer(100, 1 << 20)
    for i, payload in enumerate([b"a" * 100, b"b" * 100]):
        container.add(single_header(len(payload), i), payload, None, i)
    batch = container.drain()
    entry = builder(reader, CompressionType.LZ4).batch_entry(batch)
    metadata, payload = split_entry(entry.data)
    assert metadata.num_messages_in_batch == 2 and metadata.uncompressed_size == len(batch.payload)
    compressed = MessageDecryptor(reader).decrypt(metadata, payload)
    assert compressed is not None and decompress(CompressionType.LZ4, compressed, len(batch.payload)) == batch.payload
    messages, _ = unpacker(reader).unpack(None, 0, message_frame(command(1), entry.data))
    assert [m.data() for m in messages] == [b"a" * 100, b"b" * 100]


def test_chunks_are_encrypted_each_and_stay_under_the_max_size(pair: tuple[bytes, bytes]) -> None:
    reader = keys_for(("k1", pair))
    content = bytes(range(256)) * 40
    entries = builder(reader, max_size=2048).message_entries(OutgoingMessage(content, properties={"p": "1"}), 9)
    assert len(entries) > 5 and all(len(e.data) <= 2048 for e in entries)
    ivs = {split_entry(e.data)[0].encryption_param for e in entries}
    assert len(ivs) == len(entries)
    consumer = unpacker(reader)
    delivered = [consumer.unpack(None, 0, message_frame(command(i), e.data))[0] for i, e in enumerate(entries)]
    assert [m.data() for m in delivered[-1]] == [content] and not any(delivered[:-1])


@pytest.mark.parametrize("action", list(ConsumerCryptoFailureAction), ids=lambda a: a.name)
def test_failure_actions_on_an_entry_without_its_key(
    pair: tuple[bytes, bytes], other_pair: tuple[bytes, bytes], action: ConsumerCryptoFailureAction
) -> None:
    container = BatchContainer(100, 1 << 20)
    for i in range(3):
        container.add(single_header(1, i), b"%d" % i, None, i)
    entry = builder(keys_for(("k1", pair)), CompressionType.ZSTD).batch_entry(container.drain()).data
    consumer = unpacker(keys_for(("k1", other_pair)), action)
    messages, permits = consumer.unpack(None, 0, message_frame(command(4), entry))
    assert permits == 3
    assert consumer.unacked is not None
    if action == ConsumerCryptoFailureAction.CONSUME:
        [message] = messages  # the batch as it came, one message
        assert message.data() == split_entry(entry)[1].tobytes() and message.message_id().batch_index() == -1
        context = message.encryption_context()
        assert context is not None and context.is_decryption_failed()
        assert (context.batch_size(), context.compression_type()) == (3, CompressionType.ZSTD)
        assert consumer.unacked.pending == 0
    elif action == ConsumerCryptoFailureAction.DISCARD:
        assert messages == [] and consumer.acks.is_duplicate(5, 4) and consumer.unacked.pending == 0
    else:
        assert messages == [] and not consumer.acks.is_duplicate(5, 4)
        assert consumer.unacked.pending == 1  # redelivered when the ack timeout passes


def test_an_unencrypted_message_has_no_encryption_context() -> None:
    plain = EntryBuilder(CompressionType.NONE, False, ProducerStats())
    plain.connected("p", 1 << 20)
    [entry] = plain.message_entries(OutgoingMessage(b"clear"), 1)
    [message], _ = unpacker(None).unpack(None, 0, message_frame(command(1), entry.data))
    assert message.data() == b"clear" and message.encryption_context() is None
    assert MessageId(0, 5, 1) == message.message_id()
