"""The client examples the docs include (docs/examples/client/*.py), each run as a script as a reader
would run it: against the broker under test, its service URL from ``PULSAR_SERVICE_URL``, its
working directory holding the ``keys/`` the encryption example reads; the security page's two
against embedded brokers that require what they show (tokens over TLS; basic, TLS client
certificates and OAuth2 at once, with a local OAuth2 issuer)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.oauth2_issuer import Oauth2Issuer, RunningIssuer
from tests.support.security import Pki, SecuredBroker, secured_broker

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "client"
SCRIPTS = sorted(path.name for path in EXAMPLES.glob("*.py"))
# Each needs a broker of its own kind, set up below.
SECURED = ("secured.py", "auth_methods.py")


def write_rsa_pair(folder: Path) -> None:
    """keys/public.pem and keys/private.pem: a fresh 2048-bit RSA pair, as the encryption example expects."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    folder.mkdir()
    (folder / "private.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "public.pem").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def test_every_example_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in (EXAMPLES.parents[1]).glob("*.md"))
    for script in SCRIPTS:
        assert f"examples/client/{script}" in pages, f"no page includes {script}"


def run_example(script: str, cwd: Path, **env: str) -> str:
    """Run the example as a script with ``env`` added to this environment; its output."""
    result = subprocess.run(
        [sys.executable, EXAMPLES / script], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.mark.parametrize("script", [script for script in SCRIPTS if script not in SECURED])
def test_example_runs(broker, script: str, tmp_path: Path) -> None:
    write_rsa_pair(tmp_path / "keys")
    run_example(script, tmp_path, PULSAR_SERVICE_URL=broker.service_url)


def test_the_token_and_tls_example_runs(tls_token_broker: SecuredBroker, tmp_path: Path) -> None:
    assert tls_token_broker.pki is not None
    output = run_example(
        "secured.py",
        tmp_path,
        PULSAR_TOKEN=tls_token_broker.token("etl"),
        PULSAR_SERVICE_URL=tls_token_broker.service_url,
        PULSAR_ADMIN_URL=tls_token_broker.web_url,
        PULSAR_CA=str(tls_token_broker.pki.ca),
    )
    assert "persistent://public/default/secured-orders" in output


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oauth2Issuer]:
    with RunningIssuer(tmp_path_factory.mktemp("issuer"), {"etl": "etl-client-secret"}) as running:
        yield running


@pytest.fixture(scope="module")
def all_methods_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki, issuer: Oauth2Issuer) -> Iterator[SecuredBroker]:
    """TLS on both ports; basic (user etl), TLS client certificates and the issuer's tokens for the
    example's audience."""
    with secured_broker(
        tmp_path_factory.mktemp("all-methods-broker"),
        pki=pki,
        token_public_key=issuer.public_key_file,
        basic_users={"etl": "secret"},
        client_certificates=True,
        extra_args=("--token-audience-claim", "aud", "--token-audience", "urn:pulsar:cluster"),
    ) as running:
        yield running


def test_the_authentication_methods_example_runs(
    all_methods_broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, tmp_path: Path
) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    shutil.copy(pki.client_cert, etc / "client.pem")
    shutil.copy(pki.client_key, etc / "client-key.pem")
    shutil.move(issuer.key_file(etc, "etl"), etc / "etl-key.json")
    output = run_example(
        "auth_methods.py",
        tmp_path,
        PULSAR_SERVICE_URL=all_methods_broker.service_url,
        PULSAR_CA=str(pki.ca),
        PULSAR_ETC=str(etc),
        OAUTH2_ISSUER_URL=issuer.url,
    )
    assert "7 methods authenticated" in output
