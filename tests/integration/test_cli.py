"""The ``airflow-pulsar`` client commands against the broker process, run as a user runs them (their
failures on bad input: test_cli_errors.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from airflow_pulsar.broker.process import BrokerProcess
from tests.support.cli_command import run
from tests.support.security import Pki, SecuredBroker


def test_topics_lifecycle(broker: BrokerProcess, topic_name: str) -> None:
    assert run(broker, "topics", "create", topic_name, "--partitions", "3").returncode == 0
    assert run(broker, "topics", "create", f"{topic_name}-plain").returncode == 0
    listing = run(broker, "topics", "list").stdout.splitlines()
    assert f"persistent://public/default/{topic_name} (partitioned)" in listing
    assert f"persistent://public/default/{topic_name}-plain" in listing
    assert not any("-partition-" in line and topic_name in line for line in listing)

    again = run(broker, "topics", "create", f"{topic_name}-plain")
    assert again.returncode == 1 and "409" in again.stderr and "already exists" in again.stderr

    stats = json.loads(run(broker, "topics", "stats", topic_name, "--json").stdout)
    assert len(stats["partitions"]) == 3
    grown = run(broker, "topics", "update-partitions", topic_name, "--partitions", "5")
    assert grown.returncode == 0 and f"{topic_name} now has 5 partitions" in grown.stdout
    assert len(json.loads(run(broker, "topics", "stats", topic_name, "--json").stdout)["partitions"]) == 5
    fewer = run(broker, "topics", "update-partitions", topic_name, "--partitions", "2")
    assert fewer.returncode == 1 and "can't be less than the current partitions" in fewer.stderr, fewer.stderr

    assert run(broker, "topics", "delete", topic_name).returncode == 0
    assert run(broker, "topics", "delete", f"{topic_name}-plain").returncode == 0
    listing = run(broker, "topics", "list").stdout
    assert topic_name not in listing


def test_produce_then_consume_acknowledges(broker: BrokerProcess, topic_name: str) -> None:
    run(broker, "topics", "create", topic_name, "--partitions", "2")
    produced = run(broker, "produce", topic_name, "--count", "3000", "--size", "64", "-p", "origin=cli")
    assert produced.returncode == 0, produced.stderr
    assert "sent 3000 messages" in produced.stdout

    partial = run(broker, "consume", topic_name, "-s", "check", "-n", "1000", "-q")
    assert partial.returncode == 0 and "acknowledged 1000 messages" in partial.stderr
    # Admin REST cannot see batch-index acks: a batch the consume stopped inside counts whole there.
    stats = run(broker, "topics", "stats", topic_name).stdout
    backlog = re.search(r"backlog (\d+) messages", stats)
    assert backlog is not None and 2000 <= int(backlog.group(1)) < 3000, stats

    rest = run(broker, "consume", topic_name, "-s", "check", "--timeout", "5")
    lines = rest.stdout.splitlines()
    assert len(lines) == 2000 and all("properties={'origin': 'cli'}" in line for line in lines)
    bodies = {line.rsplit(": ", 1)[1].split(":")[0] for line in lines}
    assert len(bodies) == 2000
    assert "backlog 0 messages" in run(broker, "topics", "stats", topic_name).stdout


def test_produce_and_consume_look_topics_up_over_an_http_service_url(broker: BrokerProcess, topic_name: str) -> None:
    """``--service-url http://...``: the topic is looked up over REST, as the official client does,
    then the messages go over the binary protocol to the broker the lookup named."""
    over_http = ("--service-url", broker.web_url)
    produced = run(broker, "produce", topic_name, "--count", "5", *over_http)
    assert produced.returncode == 0 and "sent 5 messages" in produced.stdout, produced.stderr
    consumed = run(broker, "consume", topic_name, "-s", "check", "--position", "earliest", "-n", "5", *over_http)
    assert consumed.returncode == 0 and len(consumed.stdout.splitlines()) == 5, consumed.stderr


def test_produce_from_stdin_with_key_and_consume_without_ack(broker: BrokerProcess, topic_name: str) -> None:
    produced = run(broker, "produce", topic_name, "--file", "-", "--key", "user-7", "--no-batching", stdin="a\nb\nc\n")
    assert "sent 3 messages" in produced.stdout, produced.stderr
    peek = run(broker, "consume", topic_name, "-s", "peek", "--timeout", "5", "--no-ack")
    assert [line.split(": ", 1)[1] for line in peek.stdout.splitlines()] == ["a", "b", "c"]
    assert all(" key=user-7" in line for line in peek.stdout.splitlines())
    assert "backlog 3 messages" in run(broker, "topics", "stats", topic_name).stdout


def test_tune_prints_the_template() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.cli", "tune", "--message-size", "1024", "--partitions", "4", "--json"],
        capture_output=True,
        text=True,
    )
    document = json.loads(result.stdout)
    assert document["producer"]["batching_max_messages"] == 500
    assert document["producer"]["max_pending_messages_across_partitions"] == 4000
    assert document["producer"]["compression_type"] == "LZ4"


def test_commands_over_tls_with_a_token(tls_token_broker: SecuredBroker, pki: Pki, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(tls_token_broker.token("cli"))
    env = {
        **os.environ,
        "PULSAR_SERVICE_URL": tls_token_broker.service_url,
        "PULSAR_ADMIN_URL": tls_token_broker.web_url,
        "PULSAR_TLS_TRUST_CERTS": str(pki.ca),
    }

    def cli(*args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
        extra = ["--token-file", str(token_file)] if token else []
        return subprocess.run(
            [sys.executable, "-m", "airflow_pulsar.cli", *args, *extra], env=env, capture_output=True, text=True
        )

    assert cli("topics", "create", "secure").returncode == 0
    assert "sent 2 messages" in cli("produce", "secure", "-m", "a", "-m", "b").stdout
    assert cli("consume", "secure", "-s", "s", "--timeout", "5").stdout.splitlines()[-1].endswith(": b")
    refused = cli("topics", "list", token=False)
    assert refused.returncode == 1 and "401" in refused.stderr
