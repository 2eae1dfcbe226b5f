"""Token authentication (Pulsar's ``AuthenticationProviderToken``): JWTs checked with a secret or public key."""

from __future__ import annotations

from .authentication import AuthenticationFailed, Credentials, Role
from .tokens import TokenError, VerificationKey, verify_token


class TokenProvider:
    """Checks the token of method ``token`` (CONNECT) and of ``Authorization: Bearer`` (admin).

    ``key`` is the secret key (``tokenSecretKey``) or the public key (``tokenPublicKey``); the role
    is the ``role_claim`` (``tokenAuthClaim``), and with ``audience_claim`` the token must name
    ``audience`` there (``tokenAudienceClaim`` and ``tokenAudience``).
    """

    method_name = "token"
    http_scheme = "Bearer"

    def __init__(
        self,
        key: VerificationKey,
        *,
        role_claim: str = "sub",
        audience_claim: str | None = None,
        audience: str | None = None,
    ):
        if audience_claim is not None and not audience:
            raise ValueError(f"the token audience claim {audience_claim!r} needs the audience that stands for this broker")
        self._key = key
        self._role_claim = role_claim
        self._audience_claim = audience_claim
        self._audience = audience

    def authenticate(self, credentials: Credentials) -> Role:
        if not credentials.data.strip():
            raise AuthenticationFailed("the client sent no token")
        try:
            token = credentials.data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise AuthenticationFailed("invalid token: not ASCII text") from None
        try:
            claims = verify_token(
                token,
                self._key,
                role_claim=self._role_claim,
                audience_claim=self._audience_claim,
                audience=self._audience,
            )
        except TokenError as exc:
            raise AuthenticationFailed(f"invalid token: {exc}") from None
        return Role(claims.subject, claims.expires_at)
