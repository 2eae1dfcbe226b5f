"""The broker's authentication providers, built from its settings before anything binds a port."""

from __future__ import annotations

import ssl

from .authentication import AuthenticationProvider, AuthenticationService
from .authentication_basic import BasicConfigError, BasicProvider
from .authentication_tls import TlsProvider
from .authentication_token import TokenProvider
from .config import BrokerConfig, ConfigError
from .token_keys import read_public_key, read_secret_key
from .tokens import TokenError, VerificationKey


def authentication_service(config: BrokerConfig) -> AuthenticationService | None:
    """The providers ``config`` turns on (None: no authentication); ConfigError naming a bad setting."""
    providers: list[AuthenticationProvider] = []
    key = _token_key(config)
    if key is not None:
        providers.append(
            TokenProvider(
                key,
                role_claim=config.token_auth_claim,
                audience_claim=config.token_audience_claim,
                audience=config.token_audience,
            )
        )
    if config.basic_auth_conf:
        try:
            providers.append(BasicProvider.from_conf(config.basic_auth_conf))
        except BasicConfigError as exc:
            raise ConfigError(f"--basic-auth-conf: {exc}") from None
    if config.tls_trust_certs_file is not None:
        providers.append(TlsProvider())
    return AuthenticationService(providers) if providers else None


def trust_client_certificates(context: ssl.SSLContext, config: BrokerConfig) -> None:
    """Ask TLS clients for a certificate signed by the trusted CAs (required with
    ``--tls-require-trusted-client-cert``); an untrusted one fails the handshake, as in Pulsar."""
    if config.tls_trust_certs_file is None:
        return
    try:
        context.load_verify_locations(cafile=str(config.tls_trust_certs_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"--tls-trust-certs-file: cannot load {config.tls_trust_certs_file}: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED if config.tls_require_trusted_client_cert else ssl.CERT_OPTIONAL


def _token_key(config: BrokerConfig) -> VerificationKey | None:
    try:
        if config.token_secret_file:
            return read_secret_key(config.token_secret_file)
        if config.token_public_key:
            return read_public_key(config.token_public_key, config.token_public_alg)
    except TokenError as exc:
        option = "--token-secret-file" if config.token_secret_file else "--token-public-key"
        raise ConfigError(f"{option}: {exc}") from None
    return None
