"""Certificates, secret keys and secured brokers for the authentication and TLS tests, and the key
pairs of the end-to-end encryption tests.

The fixtures built on them (``pki``, ``token_broker``, ``tls_token_broker``, ``wrong_host_broker``)
are in tests/conftest.py, fresh for each module that uses them.

A test CA signs a server certificate for 127.0.0.1 and localhost, another one for a host the
tests never connect to (so hostname verification has something to refuse), and a client
certificate for TLS authentication; another CA signs a client certificate no broker trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from airflow_pulsar.broker.password_hashes import apr1_md5_crypt, des_crypt
from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.broker.token_keys import create_secret_key
from airflow_pulsar.broker.tokens import create_token
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone

CLIENT_CN = "tls-user"
# Who may log in with basic authentication on the interop suite's secured brokers.
BASIC_USERS = {"app": "s3cret-basic"}


@dataclass(frozen=True)
class Pki:
    """PEM files: the CA to trust, two server certificates with their keys, a client certificate
    (CN ``CLIENT_CN``) signed by the CA, and one signed by another CA the broker does not trust."""

    ca: Path
    cert: Path
    key: Path
    wrong_host_cert: Path
    wrong_host_key: Path
    client_cert: Path
    client_key: Path
    untrusted_client_cert: Path
    untrusted_client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return path


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    sans: list,
    usage: x509.ObjectIdentifier = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if sans or usage != x509.oid.ExtendedKeyUsageOID.SERVER_AUTH:
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        builder = (
            builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and one for another host, written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("airflow-pulsar test CA", ca_key, "airflow-pulsar test CA", ca_key, [])
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files = {}
    for label, sans in (
        ("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
        ("wrong-host", [x509.DNSName("broker.elsewhere.example")]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(label, key, "airflow-pulsar test CA", ca_key, sans)
        (directory / f"{label}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[label] = (directory / f"{label}.pem", _write_key(key, directory / f"{label}-key.pem"))
    other_ca_key = ec.generate_private_key(ec.SECP256R1())
    client = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
    for label, common_name, signer, signer_key in (
        ("client", CLIENT_CN, "airflow-pulsar test CA", ca_key),
        ("untrusted-client", CLIENT_CN, "a CA nobody trusts", other_ca_key),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(common_name, key, signer, signer_key, [], usage=client)
        (directory / f"{label}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[label] = (directory / f"{label}.pem", _write_key(key, directory / f"{label}-key.pem"))
    return Pki(
        client_cert=files["client"][0],
        client_key=files["client"][1],
        untrusted_client_cert=files["untrusted-client"][0],
        untrusted_client_key=files["untrusted-client"][1],
        ca=directory / "ca.pem",
        cert=files["server"][0],
        key=files["server"][1],
        wrong_host_cert=files["wrong-host"][0],
        wrong_host_key=files["wrong-host"][1],
    )


@dataclass(frozen=True)
class KeyPair:
    """PEM files of one key pair: the public key (SubjectPublicKeyInfo) and the private key (PKCS#8)."""

    public: Path
    private: Path


def write_key_pair(directory: Path, name: str, kind: str = "rsa") -> KeyPair:
    """A fresh key pair in ``directory`` as ``name``.pub.pem and ``name``.pem: RSA 2048 or EC P-256."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "rsa" else ec.generate_private_key(ec.SECP256R1())
    pair = KeyPair(directory / f"{name}.pub.pem", directory / f"{name}.pem")
    pair.private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    pair.public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pair


def write_secret_key(path: Path) -> bytes:
    """A new token secret key, written raw to ``path``; returns the key."""
    key = create_secret_key()
    path.write_bytes(key)
    return key


@dataclass
class SecuredBroker:
    """A broker process with token authentication and/or TLS, and what a client needs to reach it:
    our broker, or Apache Pulsar (:func:`secured_pulsar`)."""

    process: BrokerProcess | PulsarStandalone
    secret: bytes | None = None
    pki: Pki | None = None

    @property
    def service_url(self) -> str:
        """Where a client connects: ``pulsar+ssl://`` on a TLS broker."""
        if isinstance(self.process, PulsarStandalone) and self.process.tls:
            return self.process.tls_service_url  # Apache Pulsar serves both; ours TLS only
        return self.process.service_url

    @property
    def web_url(self) -> str:
        """Where admin calls and HTTP lookups go: ``https://`` on a TLS broker."""
        if isinstance(self.process, PulsarStandalone) and self.process.tls:
            return self.process.tls_web_url
        return self.process.web_url

    def token(self, subject: str = "app", expires_in: float | None = 3600, secret: bytes | None = None) -> str:
        """A token signed with the broker's key (or ``secret``); negative ``expires_in``: expired already."""
        key = secret or self.secret
        assert key is not None, "this broker has no token secret key"
        return create_token(key, subject, None if expires_in is None else time.time() + expires_in)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting the test CA."""
        assert self.pki is not None, "this broker does not serve TLS"
        return ssl.create_default_context(cafile=str(self.pki.ca))


def write_users_file(path: Path, users: dict[str, str]) -> Path:
    """An htpasswd file for ``--basic-auth-conf``: the first user's hash in $apr1$ MD5, the others'
    in crypt DES, the two forms Pulsar's basic provider checks."""
    lines = []
    for index, (user, password) in enumerate(users.items()):
        salt = secrets.token_hex(4)
        hashed = apr1_md5_crypt(password.encode(), salt.encode()) if index == 0 else des_crypt(password.encode(), salt[:2])
        lines.append(f"{user}:{hashed}\n")
    path.write_text("".join(lines))
    return path


@contextmanager
def secured_broker(
    directory: Path,
    *,
    tokens: bool = False,
    pki: Pki | None = None,
    wrong_host: bool = False,
    token_public_key: Path | None = None,
    basic_users: dict[str, str] | None = None,
    client_certificates: bool = False,
    extra_args: tuple[str, ...] = (),
) -> Iterator[SecuredBroker]:
    """Run a broker with ``--token-secret-file`` (``tokens``) or ``--token-public-key``, basic
    authentication for ``basic_users`` (name -> password), and/or TLS with ``pki``'s server
    certificate (its wrong-host one if ``wrong_host``), trusting client certificates from ``pki``'s
    CA if ``client_certificates``; stopped (by pid) on exit."""
    args: list[str] = list(extra_args)
    secret = None
    if tokens:
        secret = write_secret_key(directory / "secret.key")
        args += ["--token-secret-file", str(directory / "secret.key")]
    if token_public_key is not None:
        args += ["--token-public-key", str(token_public_key)]
    if basic_users:
        args += ["--basic-auth-conf", str(write_users_file(directory / "users.htpasswd", basic_users))]
    if pki is not None:
        cert, key = (pki.wrong_host_cert, pki.wrong_host_key) if wrong_host else (pki.cert, pki.key)
        args += ["--tls-cert-file", str(cert), "--tls-key-file", str(key)]
        if client_certificates:
            args += ["--tls-trust-certs-file", str(pki.ca)]
    process = BrokerProcess(directory / "data", *args).start()
    try:
        yield SecuredBroker(process, secret, pki)
    finally:
        process.stop()


@contextmanager
def every_method_broker(directory: Path, pki: Pki, issuer_public_key: Path, basic_users: dict[str, str]) -> Iterator[SecuredBroker]:
    """Our broker taking every authentication method at once over TLS: tokens of the OAuth2 issuer
    whose public key is ``issuer_public_key``, basic for ``basic_users``, and ``pki``'s client
    certificates, as one production broker would."""
    with secured_broker(
        directory, pki=pki, token_public_key=issuer_public_key, basic_users=basic_users, client_certificates=True
    ) as broker:
        yield broker


@contextmanager
def secured_pulsar(directory: Path, *, pki: Pki, basic_users: dict[str, str]) -> Iterator[SecuredBroker]:
    """Apache Pulsar with what :func:`secured_broker` gives ours with ``tokens``, ``pki`` and
    ``basic_users``: token (HS256) and basic authentication, TLS on ports of its own beside the plain
    ones; its superuser is ``admin``. Stopped (by pid) on exit."""
    secret = write_secret_key(directory / "secret.key")
    admin_token = create_token(secret, "admin", None)
    providers = ("AuthenticationProviderToken", "AuthenticationProviderBasic")
    config = {
        "authenticationEnabled": "true",
        "authenticationProviders": ",".join(f"org.apache.pulsar.broker.authentication.{name}" for name in providers),
        "tokenSecretKey": f"file://{directory / 'secret.key'}",
        "basicAuthConf": f"file://{write_users_file(directory / 'users.htpasswd', basic_users)}",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{admin_token}",
        "tlsCertificateFilePath": str(pki.cert),
        "tlsKeyFilePath": str(pki.key),
        "tlsTrustCertsFilePath": str(pki.ca),
    }
    pulsar = PulsarStandalone(directory / "pulsar", config=config, admin_token=admin_token, jvm_options=QUICK_JIT, tls=True)
    pulsar.start()
    try:
        yield SecuredBroker(pulsar, secret, pki)
    finally:
        pulsar.stop()
