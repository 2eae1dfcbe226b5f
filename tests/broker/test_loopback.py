"""Whether the broker listens on this machine only, and the warning when it does not while
nobody has to authenticate."""

from __future__ import annotations

import pytest

from airflow_pulsar.broker.loopback import exposure_warning, host_names, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.7", "example.invalid"])
def test_other_hosts(host: str) -> None:
    assert not is_loopback(host)


def test_names_a_loopback_broker_answers_to() -> None:
    assert host_names("127.0.0.2") == {"localhost", "127.0.0.1", "::1", "127.0.0.2"}
    assert host_names("[::1]") == {"localhost", "127.0.0.1", "::1"}


def test_the_warning_names_the_risk_and_the_remedies() -> None:
    warning = exposure_warning("0.0.0.0", 6650, 8080, authenticated=False)
    assert warning is not None
    assert "0.0.0.0 (not loopback) without authentication" in warning
    assert "ports 6650 and 8080 can read, write and delete every topic" in warning
    assert "--token-secret-file" in warning and "--host 127.0.0.1" in warning
    assert exposure_warning("0.0.0.0", 6650, 8080, authenticated=True) is None
    assert exposure_warning("127.0.0.1", 6650, 8080, authenticated=False) is None
