"""TLS client-certificate authentication (Pulsar's ``AuthenticationProviderTls``): the role is the CN."""

from __future__ import annotations

from .authentication import AuthenticationFailed, Credentials, Role


class TlsProvider:
    """Authenticates method ``tls`` by the client certificate the TLS handshake verified.

    The certificate was checked against the broker's trusted CAs during the handshake (an
    untrusted one never gets this far); its subject's common name is the role.
    """

    method_name = "tls"
    http_scheme = None

    def authenticate(self, credentials: Credentials) -> Role:
        certificate = credentials.peer_certificate
        if not certificate:
            raise AuthenticationFailed(
                "the client presented no TLS client certificate (method 'tls' needs a pulsar+ssl:// connection "
                "with a certificate signed by a CA the broker trusts)"
            )
        # getpeercert() lists the subject's RDNs in certificate order; the most specific CN is the
        # last one, which is the first in RFC 2253 order, where Pulsar takes it from.
        names = [value for rdn in certificate.get("subject", ()) for key, value in rdn if key == "commonName"]
        if not names or not names[-1]:
            raise AuthenticationFailed("the TLS client certificate has no common name (CN) to take the role from")
        return Role(names[-1])
