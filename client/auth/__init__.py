"""Authentication providers, as the official client names them: one module per method.

Each provider gives the method name and data of CONNECT (and of the answer to the broker's
refresh challenge), the admin REST headers, and the client certificate of the TLS handshake.
"""

from .base import Authentication, AuthenticationDisabled
from .basic import AuthenticationBasic
from .oauth2 import AuthenticationOauth2
from .tls import AuthenticationTLS, load_client_certificate
from .token import AuthenticationToken

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationDisabled",
    "AuthenticationOauth2",
    "AuthenticationTLS",
    "AuthenticationToken",
    "load_client_certificate",
]
