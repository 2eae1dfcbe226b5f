"""Corners a user switching from the official ``pulsar-client`` runs into: each scenario runs with
the official client and ours side by side on the broker under test, and ours must do what the
official one does, or what docs/client.md says it does instead, and why.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pulsar
import pytest

import airflow_pulsar.client as ours
from tests.support.official_client import OPERATION_TIMEOUT, RECEIVE_TIMEOUT_MS
from tests.support.security import Pki, SecuredBroker, write_key_pair

pytestmark = pytest.mark.interop

APIS = (pulsar, ours)


def _client(api: ModuleType, broker: Any, **options: Any) -> Any:
    return api.Client(broker.service_url, operation_timeout_seconds=OPERATION_TIMEOUT, **options)


@contextmanager
def _open(api: ModuleType, broker: Any, **options: Any) -> Iterator[Any]:
    """A client of ``api`` (the official one is no context manager), closed afterwards."""
    client = _client(api, broker, **options)
    try:
        yield client
    finally:
        client.close()


def _name(api: ModuleType) -> str:
    return "official" if api is pulsar else "ours"


# ---- seeking to a message id the user built ----


def _seek_results(api: ModuleType, broker: Any, topic: str, targets: list[tuple[int, bool]]) -> list[bytes]:
    """For each (batch index, inclusive): a consumer of ``api`` that received every message seeks
    to ``MessageId(ledger_id, entry_id[, batch_index])`` of message 12 and receives one."""
    got = []
    with _open(api, broker) as client:
        for number, (batch_index, inclusive) in enumerate(targets):
            consumer = client.subscribe(
                topic, f"{_name(api)}-{number}", initial_position=api.InitialPosition.Earliest, start_message_id_inclusive=inclusive
            )
            received = [consumer.receive(RECEIVE_TIMEOUT_MS) for _ in range(20)]
            position = received[12].message_id()
            fields = {"ledger_id": position.ledger_id(), "entry_id": position.entry_id()}
            if batch_index is not None:
                fields["batch_index"] = batch_index
            consumer.seek(api.MessageId(**fields))
            got.append(consumer.receive(RECEIVE_TIMEOUT_MS).data())
            consumer.close()
    return got


@pytest.mark.parametrize("producer", ["official-unbatched", "official-batched", "ours-default"])
def test_seek_to_a_built_message_id_lands_where_the_official_does(broker: Any, topic_name: str, producer: str) -> None:
    """Both consumers resume at the same message for each way the entries were written: after
    message 12 when it is an entry of its own; at the start of its entry when the id names the
    entry of a batch (batch index -1 covers the whole entry); after batch index i when it names i.
    Our producer batches by default, so each synchronous send is a batch of one: seeking to its
    (ledger, entry) then gives message 12 again, with either consumer."""
    with _open(pulsar if producer.startswith("official") else ours, broker) as client:
        options = {"batching_enabled": producer == "official-batched"} if producer.startswith("official") else {}
        sender = client.create_producer(topic_name, batching_max_messages=5, batching_max_publish_delay_ms=60_000, **options)
        if producer == "official-batched":
            for index in range(20):
                sender.send_async(b"m%d" % index, None)
            sender.flush()
        else:
            for index in range(20):
                sender.send(b"m%d" % index)
    targets = [(None, False), (None, True), (0, False), (1, False), (1, True)]
    expected = _seek_results(pulsar, broker, topic_name, targets)
    assert _seek_results(ours, broker, topic_name, targets) == expected
    assert expected == {
        "official-unbatched": [b"m13", b"m12", b"m13", b"m13", b"m12"],
        "official-batched": [b"m10", b"m10", b"m11", b"m12", b"m11"],
        "ours-default": [b"m12", b"m12", b"m13", b"m13", b"m13"],
    }[producer]


# ---- the encryption context of a decrypted message ----


@pytest.mark.parametrize("producer", ["official-unbatched", "official-batched", "ours-default", "ours-unbatched"])
def test_the_encryption_context_reports_what_the_official_consumer_reports(broker: Any, topic_name: str, producer: str) -> None:
    """``uncompressed_message_size()`` is the entry's uncompressed size, as both consumers report
    it: 5 for a 5-byte message in an entry of its own, 13 for one in a batch (our producer's
    default; the official producer's with batching on), whose payload also holds its metadata."""
    pair = write_key_pair(Path(tempfile.mkdtemp(prefix="corner-keys-")), "main")
    make = pulsar if producer.startswith("official") else ours
    options = {} if producer == "ours-default" else {"batching_enabled": producer.endswith("-batched")}
    with _open(make, broker) as client:
        sender = client.create_producer(
            topic_name,
            compression_type=make.CompressionType.LZ4,
            encryption_key="main",
            crypto_key_reader=make.CryptoKeyReader(str(pair.public), str(pair.private)),
            **options,
        )
        sender.send(b"hello")
    seen = []
    for api in APIS:
        with _open(api, broker) as client:
            consumer = client.subscribe(
                topic_name,
                _name(api),
                initial_position=api.InitialPosition.Earliest,
                crypto_key_reader=api.CryptoKeyReader(str(pair.public), str(pair.private)),
            )
            context = consumer.receive(RECEIVE_TIMEOUT_MS).encryption_context()
            seen.append([context.uncompressed_message_size(), context.batch_size()])
    assert seen[1] == seen[0]
    assert seen[0] == ([5, -1] if producer.endswith("-unbatched") else [13, 1])


# ---- what a custom message router is given ----

ROUTER_READS = (
    "data", "value", "partition_key", "properties", "event_timestamp", "ordering_key", "publish_timestamp",
    "topic_name", "redelivery_count", "schema_version", "producer_name", "has_null_value", "encryption_context",
)


def test_a_message_router_gets_the_official_message_api(broker: Any, topic_name: str) -> None:
    assert broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic_name}/partitions", json=3).status_code == 204
    seen = []
    for api in APIS:
        reads: dict[str, Any] = {}

        def router(message: Any, partitions: int, reads: dict[str, Any] = reads) -> int:
            reads.update({name: getattr(message, name)() for name in ROUTER_READS})
            reads["message_id"] = str(message.message_id())
            return 2

        with _open(api, broker) as client:
            sender = client.create_producer(topic_name, message_router=router, batching_enabled=False)
            sender.send(b"routed", partition_key="k", properties={"a": "b"}, event_timestamp=5)
        seen.append(reads)
    assert seen[0]["value"] == b"routed" and seen[0]["message_id"] == "(-1,-1,-1,-1)"
    assert seen[1] == seen[0]


# ---- acknowledging, on a multi-topics consumer, an id that names no topic ----


def test_a_multi_topics_consumer_refuses_an_id_that_names_no_topic(broker: Any, topic_name: str) -> None:
    seen = []
    for api in APIS:
        topic = f"{topic_name}-{_name(api)}"
        with _open(api, broker) as client:
            consumer = client.subscribe([topic, topic + "-other"], "sub")
            sent = client.create_producer(topic, batching_enabled=False).send(b"x")
            consumer.receive(RECEIVE_TIMEOUT_MS)
            outcome = []
            for action in ("acknowledge", "acknowledge_cumulative", "negative_acknowledge", "seek"):
                try:
                    getattr(consumer, action)(sent)
                    outcome.append("done")
                except api.PulsarException as exc:
                    outcome.append(type(exc).__name__)
            seen.append(outcome)
    assert seen[0] == ["OperationNotSupported", "OperationNotSupported", "done", "OperationNotSupported"]
    assert seen[1] == seen[0]


# ---- bad arguments and failing credentials ----


def _first_use(api: ModuleType, broker: Any, topic: str, **options: Any) -> str:
    """What making a client with ``options`` and a producer on ``topic`` raises, and when."""
    try:
        client = _client(api, broker, **options)
    except Exception as exc:
        return f"construction: {type(exc).__name__}"
    try:
        client.create_producer(topic)
        return "works"
    except Exception as exc:
        return f"first use: {type(exc).__name__}"
    finally:
        client.close()


def _failing_supplier() -> str:
    raise RuntimeError("no token here")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("token-supplier-raises", ["first use: AuthenticationError", "first use: AuthenticationError"]),
        ("oauth2-without-issuer", ["first use: AuthenticationError", "construction: ValueError"]),
        ("unknown-plugin", ["first use: AuthenticationError", "construction: ValueError"]),
    ],
)
def test_authentication_that_cannot_work(broker: Any, topic_name: str, case: str, expected: list[str]) -> None:
    """Where ours fails at construction the official client fails at first use: both before
    anything is sent (docs/client.md says why ours stays earlier)."""

    def authentication(api: ModuleType) -> Any:
        if case == "token-supplier-raises":
            return api.AuthenticationToken(_failing_supplier)
        if case == "oauth2-without-issuer":
            return api.AuthenticationOauth2('{"client_id": "app", "client_secret": "secret"}')
        return api.Authentication("no-such-plugin", "")

    outcomes = []
    for api in APIS:
        try:
            made = authentication(api)
        except Exception as exc:
            outcomes.append(f"construction: {type(exc).__name__}")
            continue
        outcomes.append(_first_use(api, broker, f"{topic_name}-{_name(api)}", authentication=made))
    assert outcomes == expected


def test_compression_type_none(broker: Any, topic_name: str) -> None:
    """The official client refuses None; ours takes None for every option as "the default", which
    the Airflow operators rely on to pass unset settings (docs/client.md)."""
    with _open(pulsar, broker) as client:
        with pytest.raises(ValueError, match="compression_type"):
            client.create_producer(topic_name, compression_type=None)
    with _open(ours, broker) as client:
        producer = client.create_producer(topic_name, compression_type=None)
        assert producer.send(b"x") is not None


def test_a_client_certificate_that_does_not_load(tls_token_any: SecuredBroker, pki: Pki, tmp_path: Path, topic_name: str) -> None:
    """On a TLS broker with tokens (Apache Pulsar's for the module): the official client fails the
    connection with ConnectError, ours refuses at construction with AuthenticationError naming the
    file (docs/client.md)."""
    broken = tmp_path / "broken.pem"
    broken.write_text("not a certificate\n")
    outcomes = []
    for api in APIS:
        options = {
            "tls_trust_certs_file_path": str(pki.ca),
            "tls_certificate_file_path": str(broken),
            "tls_private_key_file_path": str(broken),
            "authentication": api.AuthenticationToken(tls_token_any.token()),
        }
        outcomes.append(_first_use(api, tls_token_any, topic_name, **options))
    assert outcomes == ["first use: ConnectError", "construction: AuthenticationError"]


# ---- records ----


def test_a_record_drops_undeclared_fields_and_refuses_to_set_them() -> None:
    """As the official Record: a keyword naming no declared field is dropped, setting one raises."""
    outcomes = []
    for api in APIS:
        record_type = type("Point", (api.schema.Record,), {"a": api.schema.Integer()})
        record = record_type(a=1, c=8)
        with pytest.raises(AttributeError) as raised:
            record.c = 8
        outcomes.append([record.a, hasattr(record, "c"), str(raised.value).startswith("Cannot set undeclared field c on record")])
    assert outcomes[0] == [1, False, True]
    assert outcomes[1] == outcomes[0]


# ---- threads after close ----


def test_no_thread_of_ours_outlives_close(broker: Any, topic_name: str) -> None:
    """With a custom logger, producers, consumers, a reader and a listener: once ``close()``
    returns, no thread the client started is alive (the official client's are native threads)."""
    logger = logging.getLogger(f"corner-{topic_name}")
    logger.setLevel(logging.DEBUG)
    before = set(threading.enumerate())
    for api in APIS * 3:  # a thread left behind shows in one round or another
        client = _client(api, broker, logger=logger)
        consumer = client.subscribe(topic_name, _name(api), message_listener=lambda c, m: c.acknowledge(m))
        client.create_producer(topic_name).send(b"x")
        client.create_reader(topic_name, api.MessageId.earliest).read_next(RECEIVE_TIMEOUT_MS)
        time.sleep(0.2)
        consumer.close()
        client.close()
        assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []
