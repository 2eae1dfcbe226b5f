"""The errors of admin REST calls: one class per kind of failure, each naming the call that failed."""

from __future__ import annotations

from ..exceptions import PulsarException, Result


class AdminError(PulsarException):
    """An admin REST call failed; ``status`` is the HTTP status (None when there was no HTTP error).

    The message names the client method, the HTTP method and path, and Pulsar's ``reason``.
    """

    def __init__(self, reason: str, *, operation: str, method: str, path: str, status: int | None = None):
        self.reason = reason
        self.operation = operation
        self.method = method
        self.path = path
        self.status = status
        super().__init__(self._describe())

    def _describe(self) -> str:
        outcome = f"HTTP {self.status}: " if self.status is not None else ""
        return f"{self.operation}: {self.method} {self.path} failed: {outcome}{self.reason}"


class AdminNotFoundError(AdminError):
    """404: the tenant, namespace, topic or subscription does not exist."""


class AdminConflictError(AdminError):
    """409: the topic or subscription already exists, or the topic is busy."""


class AdminPreconditionFailedError(AdminError):
    """412: e.g. deleting a subscription that has active consumers without ``force``."""


class AdminAuthorizationError(AdminError):
    """401 or 403: missing, invalid or insufficient credentials (403: a role lacking a permission
    for a namespace operation or a policy)."""

    result = Result.AuthorizationError


class AdminAuthenticationError(AdminAuthorizationError):
    """401: no token, or one the broker refuses (wrong key, expired); the reason says which.

    With authorization on, Pulsar also answers 401 (not 403) to a role lacking a permission for a
    topic or tenant operation, and its reason then starts ``Unauthorized to ...``; catch
    :class:`AdminAuthorizationError` for either."""

    result = Result.AuthenticationError


class AdminServerError(AdminError):
    """5xx: the broker failed; usually worth retrying."""


class AdminConnectionError(AdminError):
    """No HTTP answer: the admin service could not be reached (the message names the URL)."""

    result = Result.ConnectError

    def __init__(self, reason: str, *, operation: str, method: str, path: str, url: str):
        self.url = url
        super().__init__(reason, operation=operation, method=method, path=path)

    def _describe(self) -> str:
        return f"{self.operation}: cannot reach the Pulsar admin service at {self.url} ({self.method}): {self.reason}"


class AdminTimeoutError(AdminConnectionError):
    """The admin service did not answer within ``timeout_seconds``."""

    result = Result.Timeout


_BY_STATUS: dict[int, type[AdminError]] = {
    401: AdminAuthenticationError,
    403: AdminAuthorizationError,
    404: AdminNotFoundError,
    409: AdminConflictError,
    412: AdminPreconditionFailedError,
}


def error_class(status: int) -> type[AdminError]:
    """The error raised for an HTTP error ``status``."""
    return _BY_STATUS.get(status) or (AdminServerError if status >= 500 else AdminError)
