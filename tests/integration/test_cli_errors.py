"""Every ``airflow-pulsar`` command, given bad input, fails with exit status 1 and one line on stderr
naming the cause, never a traceback; run as a user runs them, against one token-secured embedded
broker for the module (the command line is the same whichever broker answers).

The failing commands are independent, so they run at once, a few processes at a time, while
their ports are held busy; each test then checks one command's outcome.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_pulsar.cli import COMMANDS
from tests.support.security import SecuredBroker

FORGED_TOKEN = "{forged_token}"  # a token signed with a key the broker does not know


@dataclass(frozen=True)
class BadInput:
    """A command line (with ``{placeholders}`` filled in per run) and the cause its one line must name."""

    args: tuple[str, ...]
    cause: str
    env: dict[str, str] = field(default_factory=dict)


CASES: dict[str, BadInput] = {
    # standalone: both ports taken, as by Airflow's api-server on 8080
    "standalone-port-in-use": BadInput(
        ("standalone", "--data-dir", "{work}/port", "--port", "{busy_port}", "--http-port", "0"),
        "--port {busy_port} (binary protocol) is already in use; pass another port, or 0 for a free one",
    ),
    "standalone-http-port-in-use": BadInput(
        ("standalone", "--data-dir", "{work}/http-port", "--port", "0", "--http-port", "{busy_port}"),
        "--http-port {busy_port} (admin REST) is already in use; pass another port, or 0 for a free one",
    ),
    "standalone-port-out-of-range": BadInput(
        ("standalone", "--data-dir", "{work}/range", "--port", "70000"),
        "argument --port: must be a port number from 0 to 65535 (0: any free port), got '70000'",
    ),
    "standalone-no-data-dir": BadInput(("standalone",), "the following arguments are required: --data-dir"),
    "standalone-authorization-without-authentication": BadInput(
        ("standalone", "--data-dir", "{work}/authz", "--port", "0", "--http-port", "0", "--authorization"),
        "--authorization needs authentication",
    ),
    "standalone-missing-certificate": BadInput(
        ("standalone", "--data-dir", "{work}/tls", "--port", "0", "--http-port", "0", "--tls-cert-file", "{work}/none.pem"),
        "cannot load the TLS certificate {work}/none.pem",
    ),
    # tokens
    "tokens-missing-secret-key": BadInput(
        ("tokens", "create", "--subject", "app", "--secret-file", "{work}/none.key"),
        "cannot read the secret key file {work}/none.key: No such file or directory",
    ),
    "tokens-bad-expiry": BadInput(
        ("tokens", "create", "--subject", "app", "--secret-file", "{work}/none.key", "--expiry", "5x"),
        "argument -e/--expiry/--expiry-time: '5x' is not a duration",
    ),
    # topics (admin REST)
    "topics-bad-name": BadInput(("topics", "create", "a/b/c/d"), "invalid topic name 'a/b/c/d'"),
    "topics-negative-partitions": BadInput(
        ("topics", "create", "t", "--partitions", "-1"), "argument --partitions: must be a whole number of 0 or more, got '-1'"
    ),
    "topics-stats-of-a-missing-topic": BadInput(("topics", "stats", "never-created"), "HTTP 404"),
    "topics-delete-of-a-missing-topic": BadInput(("topics", "delete", "never-created"), "HTTP 404"),
    "topics-list-of-a-missing-namespace": BadInput(("topics", "list", "--namespace", "no-tenant/no-namespace"), "HTTP 404"),
    "topics-wrong-token": BadInput(("topics", "list"), "HTTP 401", {"PULSAR_TOKEN": FORGED_TOKEN}),
    "topics-admin-unreachable": BadInput(
        ("topics", "list", "--admin-url", "http://127.0.0.1:1"), "cannot reach the Pulsar admin service at http://127.0.0.1:1"
    ),
    "topics-admin-url-is-pulsar": BadInput(
        ("topics", "list", "--admin-url", "{service_url}"),
        "--admin-url '{service_url}' must start with http:// or https:// (pulsar:// is for --service-url)",
    ),
    # subscriptions (admin REST)
    "subscriptions-bad-position": BadInput(
        ("subscriptions", "create", "t", "s", "--position", "yesterday"), "argument --position:"
    ),
    "subscriptions-reset-of-a-missing-subscription": BadInput(
        ("subscriptions", "reset", "never-created", "s", "--to", "earliest"), "HTTP 404"
    ),
    # permissions (admin REST)
    "permissions-without-a-target": BadInput(
        ("permissions", "grant", "--role", "app", "--actions", "produce"), "one of the arguments --namespace --topic is required"
    ),
    "permissions-unknown-action": BadInput(
        ("permissions", "grant", "--namespace", "public/default", "--role", "app", "--actions", "produce,publish"),
        "argument --actions: unknown action 'publish'",
    ),
    "permissions-subscription-without-namespace": BadInput(
        ("permissions", "grant", "--topic", "t", "--subscription", "s", "--roles", "app"), "--subscription goes with --namespace"
    ),
    "permissions-of-a-missing-namespace": BadInput(("permissions", "list", "--namespace", "public/never-created"), "HTTP 404"),
    # produce (binary protocol)
    "produce-service-url-of-another-scheme": BadInput(
        ("produce", "t", "-m", "x", "--service-url", "kafka://127.0.0.1:9092"),
        "--service-url 'kafka://127.0.0.1:9092' must start with pulsar://, pulsar+ssl://, http:// or https://",
    ),
    "produce-missing-token-file": BadInput(
        ("produce", "t", "-m", "x", "--token-file", "{work}/none.token"),
        "--token-file {work}/none.token: cannot read it: No such file or directory",
    ),
    "produce-broker-unreachable": BadInput(
        ("produce", "t", "-m", "x", "--service-url", "pulsar://127.0.0.1:1"), "cannot connect to 127.0.0.1:1"
    ),
    "produce-wrong-token": BadInput(("produce", "t", "-m", "x"), "signature does not match", {"PULSAR_TOKEN": FORGED_TOKEN}),
    "produce-bad-property": BadInput(
        ("produce", "t", "-m", "x", "-p", "novalue"), "argument -p/--property: expects KEY=VALUE, got 'novalue'"
    ),
    "produce-negative-count": BadInput(
        ("produce", "t", "--count", "-5"), "argument --count: must be a whole number of 0 or more, got '-5'"
    ),
    # consume
    "consume-bad-topic": BadInput(("consume", "a/b/c/d", "-s", "s"), "invalid topic name 'a/b/c/d'"),
    "consume-zero-timeout": BadInput(
        ("consume", "t", "-s", "s", "--timeout", "0"), "argument --timeout: must be a number greater than 0, got '0'"
    ),
    "consume-bad-type": BadInput(("consume", "t", "-s", "s", "--type", "Bogus"), "argument --type: invalid choice: 'Bogus'"),
    "consume-no-subscription": BadInput(("consume", "t"), "the following arguments are required: -s/--subscription"),
    # tune
    "tune-zero-size": BadInput(("tune", "--message-size", "0"), "message_size_bytes must be positive"),
    "tune-size-not-a-number": BadInput(("tune", "--message-size", "big"), "argument --message-size: invalid int value: 'big'"),
    # demo
    "demo-unknown-broker": BadInput(("demo", "--broker", "kafka"), "argument --broker: invalid choice: 'kafka'"),
    # the dispatch itself
    "unknown-command": BadInput(("nonsense",), "unknown command 'nonsense'"),
    "no-command": BadInput((), "give a command: standalone, tokens"),
}


@dataclass(frozen=True)
class Run:
    """What one command line printed and returned, and the cause it was expected to name."""

    cause: str
    result: subprocess.CompletedProcess[str]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.cli", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-errors")


@pytest.fixture(scope="module")
def endpoints(token_broker: SecuredBroker) -> dict[str, str]:
    """The environment that points the commands at the broker, with a valid token."""
    return {
        "PULSAR_SERVICE_URL": token_broker.service_url,
        "PULSAR_ADMIN_URL": token_broker.web_url,
        "PULSAR_TOKEN": token_broker.token("cli"),
    }


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture(scope="module")
def runs(token_broker: SecuredBroker, endpoints: dict[str, str], work: Path, busy_port: int) -> dict[str, Run]:
    """Every bad command line run once, four at a time."""
    values = {
        "work": str(work),
        "busy_port": str(busy_port),
        "service_url": token_broker.service_url,
        "web_url": token_broker.web_url,
        "forged_token": token_broker.token("cli", secret=b"another key of 32 bytes, unknown"),
    }

    def run(case: BadInput) -> Run:
        args = [arg.format(**values) for arg in case.args]
        env = {**endpoints, **{name: value.format(**values) for name, value in case.env.items()}}
        return Run(case.cause.format(**values), cli(*args, env=env))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(CASES, pool.map(run, CASES.values()), strict=True))


@pytest.mark.parametrize("case", CASES)
def test_bad_input_fails_with_one_line_naming_the_cause(runs: dict[str, Run], case: str) -> None:
    run = runs[case]
    lines = [line for line in run.result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in run.result.stdout + run.result.stderr, run.result.stderr
    assert len(lines) == 1, run.result.stderr
    assert run.cause in lines[0]
    assert lines[0].startswith("airflow-pulsar")
    assert run.result.returncode == 1


def test_every_command_is_given_bad_input() -> None:
    assert set(COMMANDS) <= {case.args[0] for case in CASES.values() if case.args}


def test_a_start_refused_for_a_taken_port_lets_the_data_dir_go(runs: dict[str, Run], work: Path) -> None:
    assert runs["standalone-port-in-use"].result.returncode == 1
    retry = subprocess.Popen(
        [sys.executable, "-m", "airflow_pulsar.cli", "standalone", "--data-dir", str(work / "port"), "--port", "0", "--http-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert retry.stdout is not None and "ready" in retry.stdout.readline()
    finally:
        retry.terminate()
        retry.wait(timeout=30)


def test_debug_shows_the_traceback_instead(endpoints: dict[str, str]) -> None:
    result = cli("topics", "create", "a/b/c/d", "--debug", env=endpoints)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "invalid topic name 'a/b/c/d'" in result.stderr


def test_version_is_the_installed_one() -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"airflow-pulsar {importlib.metadata.version('airflow-pulsar')}\n"


@pytest.mark.parametrize(
    "args, default",
    [
        (("standalone",), "(default: 8080)"),
        (("tokens", "create"), "(default: never expires)"),
        (("topics", "create"), "(default: 0)"),
        (("produce",), "(default: 100)"),
        (("consume",), "(default: 5.0)"),
        (("tune",), "(default: 10.0)"),
        (("demo",), "(default: embedded)"),
    ],
)
def test_help_shows_the_defaults(args: tuple[str, ...], default: str) -> None:
    result = cli(*args, "--help")
    assert result.returncode == 0
    assert default in " ".join(result.stdout.split())  # help text wraps at the terminal width
