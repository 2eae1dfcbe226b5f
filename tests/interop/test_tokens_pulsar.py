"""``airflow-pulsar tokens`` against Apache Pulsar's own token tool and broker, for HS256, RS256 and ES256.

Keys and tokens cross both ways: Pulsar's ``tokens`` tool (``TokensCliUtils``, run from the
broker's jars) validates what our CLI makes and our CLI validates what Pulsar's tool makes; then
an Apache Pulsar broker and our broker, given the same key (``tokenSecretKey``, or
``tokenPublicKey`` with ``tokenPublicAlg``), take the tokens our CLI makes and refuse a token
signed with another key (for the key pairs; secret keys on both brokers are in
test_differential.py). The official client is the one connecting. One Pulsar JVM serves the
module, reconfigured for each key pair.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import httpx
import pulsar
import pytest

from airflow_pulsar import cli
from airflow_pulsar.broker.process import BrokerProcess
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone, classpath, java_executable

pytestmark = pytest.mark.interop

ALGORITHMS = ["HS256", "RS256", "ES256"]
PULSAR_TOKENS_TOOL = "org.apache.pulsar.utils.auth.tokens.TokensCliUtils"


@dataclass(frozen=True)
class KeyFiles:
    """One algorithm's keys on disk: the signing key and the checking key (one file for HS256)."""

    algorithm: str
    signing: Path
    checking: Path

    @property
    def secret(self) -> bool:
        return self.algorithm.startswith("HS")

    def sign_options(self) -> list[str]:
        """The options of ``tokens create`` that sign with this key (both tools spell them alike)."""
        if self.secret:
            return ["--secret-key", f"file://{self.signing}"]
        return ["--private-key", f"file://{self.signing}", "--signature-algorithm", self.algorithm]

    def check_options(self) -> list[str]:
        """The options of ``tokens validate`` that check with this key."""
        if self.secret:
            return ["--secret-key", f"file://{self.checking}"]
        return ["--public-key", f"file://{self.checking}", "--signature-algorithm", self.algorithm]

    def broker_config(self) -> dict[str, str]:
        """Apache Pulsar's settings that check tokens with this key."""
        if self.secret:
            return {"tokenSecretKey": f"file://{self.checking}"}
        return {"tokenPublicKey": f"file://{self.checking}", "tokenPublicAlg": self.algorithm}

    def embedded_options(self) -> list[str]:
        """Our broker's options that check tokens with this key."""
        if self.secret:
            return ["--token-secret-file", str(self.checking)]
        return ["--token-public-key", str(self.checking), "--token-public-alg", self.algorithm]


def ours(*args: str) -> subprocess.CompletedProcess[str]:
    """``airflow-pulsar tokens ARGS``, run in this process (the command's own entry point and error
    handling; tests/integration/test_auth_token.py runs it as a process)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["tokens", *args])
    return subprocess.CompletedProcess(["airflow-pulsar", "tokens", *args], code, out.getvalue(), err.getvalue())


def theirs(*args: str) -> subprocess.CompletedProcess[str]:
    """Apache Pulsar's ``pulsar tokens ARGS`` (the class bin/pulsar runs), on the broker's classpath."""
    command = [java_executable(), "-cp", classpath(), PULSAR_TOKENS_TOOL, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def succeeded(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, f"{run.args} failed:\n{run.stdout}\n{run.stderr[-3000:]}"
    return run.stdout.strip()


def make_keys(tool: str, directory: Path, algorithm: str) -> KeyFiles:
    """New keys for ``algorithm``, made by ``tool`` (``ours`` or ``theirs``)."""
    directory.mkdir(parents=True, exist_ok=True)
    run = ours if tool == "ours" else theirs
    if algorithm.startswith("HS"):
        key = directory / f"{tool}-{algorithm}.key"
        succeeded(run("create-secret-key", "--output", str(key)))
        return KeyFiles(algorithm, key, key)
    private, public = directory / f"{tool}-{algorithm}.private", directory / f"{tool}-{algorithm}.public"
    succeeded(
        run("create-key-pair", "--signature-algorithm", algorithm, "--output-private-key", str(private), "--output-public-key", str(public))
    )
    return KeyFiles(algorithm, private, public)


@pytest.fixture(scope="module", autouse=True)
def broker_log_is_clean(request: pytest.FixtureRequest) -> None:
    """Replaces the interop tier's check, which would start a module broker of each kind: the
    brokers here are the tests' own, and the broker test reads its embedded broker's log itself.
    Pulsar's tool and broker are the other side of every test, so the module needs Apache Pulsar."""
    if request.config.getoption("--brokers") not in ("pulsar", "both"):
        pytest.skip("compares with Apache Pulsar: run with --brokers pulsar or both")


@pytest.fixture(scope="module")
def token_pulsar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PulsarStandalone]]:
    """Holds the module's Apache Pulsar once started (under "jvm"); stopped after the module."""
    holder: dict[str, PulsarStandalone] = {}
    yield holder
    if "jvm" in holder:
        holder["jvm"].stop()


def serve_with(holder: dict[str, PulsarStandalone], keys: KeyFiles, work: Path) -> PulsarStandalone:
    """The module's Apache Pulsar, (re)started to check tokens with ``keys`` only."""
    admin_token = succeeded(ours("create", "--subject", "admin", *keys.sign_options()))
    config = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{admin_token}",
        **keys.broker_config(),
    }
    jvm = holder.get("jvm")
    if jvm is None:
        jvm = holder["jvm"] = PulsarStandalone(work / "pulsar", config=config, admin_token=admin_token, jvm_options=QUICK_JIT)
        return jvm.start()
    jvm.stop()
    jvm.config = {key: value for key, value in jvm.config.items() if not key.startswith("tokenP") and key != "tokenSecretKey"}
    jvm.config.update(config)
    jvm.admin_headers = {"Authorization": f"Bearer {admin_token}"}
    return jvm.start()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_keys_and_tokens_cross_between_pulsars_tool_and_ours(algorithm: str, tmp_path: Path) -> None:
    their_keys, our_keys = make_keys("theirs", tmp_path, algorithm), make_keys("ours", tmp_path, algorithm)
    by_them = succeeded(theirs("create", "--subject", "made-by-pulsar", *their_keys.sign_options()))
    assert "subject made-by-pulsar, expires never" in succeeded(ours("validate", by_them, *their_keys.check_options()))
    for keys in (their_keys, our_keys):
        by_us = succeeded(ours("create", "--subject", "made-by-us", "--expiry", "1h", *keys.sign_options()))
        assert "sub=made-by-us" in succeeded(theirs("validate", *keys.check_options(), by_us)), keys
    # A token signed with another key of the same kind is refused, the reason named in one line.
    refused = ours("validate", by_them, *our_keys.check_options())
    key_kind = "secret key" if our_keys.secret else "public key"
    assert refused.returncode == 1
    assert refused.stderr == f"airflow-pulsar tokens: signature does not match the {key_kind}\n"


# HS256 tokens on Apache Pulsar's broker (tokenSecretKey) are in test_differential.py's
# credentials test; a key pair needs a broker of its own here, at one Pulsar restart each.
@pytest.mark.parametrize("algorithm", [name for name in ALGORITHMS if not name.startswith("HS")])
def test_both_brokers_take_our_cli_tokens_and_refuse_another_keys(
    algorithm: str, token_pulsar: dict[str, PulsarStandalone], tmp_path_factory: pytest.TempPathFactory, topic_name: str
) -> None:
    work = tmp_path_factory.mktemp(f"tokens-{algorithm}")
    keys = make_keys("ours", work, algorithm)
    other = make_keys("ours", work / "other", algorithm)
    good = succeeded(ours("create", "--subject", "app", "--expiry", "1h", *keys.sign_options()))
    forged = succeeded(ours("create", "--subject", "app", *other.sign_options()))
    embedded = BrokerProcess(work / "embedded", *keys.embedded_options()).start()
    try:
        brokers = {"pulsar": serve_with(token_pulsar, keys, work), "embedded": embedded}
        for name, broker in brokers.items():
            client = pulsar.Client(
                broker.service_url,
                authentication=pulsar.AuthenticationToken(good),
                operation_timeout_seconds=10,
                logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            )
            try:
                assert client.create_producer(topic_name).send(b"signed with " + algorithm.encode()) is not None, name
            finally:
                client.close()
            stats = f"{broker.web_url}/admin/v2/persistent/public/default/{topic_name}/stats"
            assert httpx.get(stats, headers={"Authorization": f"Bearer {good}"}, timeout=10).status_code == 200, name
            client = pulsar.Client(
                broker.service_url,
                authentication=pulsar.AuthenticationToken(forged),
                operation_timeout_seconds=5,
                logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            )
            try:
                with pytest.raises(pulsar.PulsarException):
                    client.create_producer(topic_name)
            finally:
                client.close()
            refused = httpx.get(stats, headers={"Authorization": f"Bearer {forged}"}, timeout=10)
            assert refused.status_code == 401, name
        # Our broker names the cause.
        assert "signature does not match" in refused.json()["reason"]
    finally:
        embedded.stop()
    assert "Traceback" not in embedded.log_path.read_text(errors="replace")
