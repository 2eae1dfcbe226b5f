"""The limits the broker holds its clients to: Pulsar's names and defaults on the command line,
and the count of connections per address that refuses one past the limit in Pulsar's words."""

from __future__ import annotations

import argparse

import pytest

from airflow_pulsar.broker.client_limits import ClientLimits
from airflow_pulsar.broker.config import BrokerConfig, ConfigError, add_arguments, from_arguments
from airflow_pulsar.broker.connection_admission import ConnectionAdmission

# Apache Pulsar 4.2's ServiceConfiguration defaults, read from its class.
PULSAR_DEFAULTS = {
    "--max-unacked-messages-per-consumer": 50_000,
    "--max-unacked-messages-per-subscription": 200_000,
    "--max-pending-publish-requests-per-connection": 1000,
    "--broker-max-connections": 0,
    "--broker-max-connections-per-ip": 0,
    "--max-consumers-per-subscription": 0,
    "--max-producers-per-topic": 0,
    "--pulsar-channel-write-buffer-high-water-mark": 65536,
    "--pulsar-channel-write-buffer-low-water-mark": 32768,
}


def parse(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(["--data-dir", "/tmp/unused", *argv]))


def test_defaults_are_pulsars() -> None:
    limits = parse().limits
    assert limits == ClientLimits()
    for option, default in PULSAR_DEFAULTS.items():
        assert getattr(limits, option[2:].replace("-", "_")) == default, option
    assert parse().keepalive_seconds == 30.0  # keepAliveIntervalSeconds


def test_each_limit_is_an_option() -> None:
    config = parse(*(arg for option in PULSAR_DEFAULTS for arg in (option, "7")), "--keep-alive-interval-seconds", "2.5")
    assert {getattr(config.limits, option[2:].replace("-", "_")) for option in PULSAR_DEFAULTS} == {7}
    assert config.keepalive_seconds == 2.5


def test_water_marks_the_wrong_way_round_are_refused() -> None:
    with pytest.raises(ConfigError, match="low-water-mark must not exceed --pulsar-channel-write-buffer-high-water-mark"):
        parse("--pulsar-channel-write-buffer-high-water-mark", "1000", "--pulsar-channel-write-buffer-low-water-mark", "2000")


def test_admission_counts_per_address_and_in_all() -> None:
    admission = ConnectionAdmission(max_connections=3, max_per_address=2)
    assert admission.admit("10.0.0.1", 1) is None and admission.admit("10.0.0.1", 2) is None
    assert admission.admit("10.0.0.1", 3) == "Reached the maximum number of connections on address/10.0.0.1:3"
    assert admission.admit("10.0.0.2", 4) is None
    assert admission.admit("10.0.0.3", 5) == "Reached the maximum number of connections"
    admission.release("10.0.0.1")
    assert admission.admit("10.0.0.1", 6) is None
    unlimited = ConnectionAdmission()
    assert all(unlimited.admit("10.0.0.1", port) is None for port in range(1000))
