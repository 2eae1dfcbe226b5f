"""What each admin REST path requires of the role calling it, and the middleware that checks it.

Every handler of the admin API is marked with :func:`requires` and one requirement, taken from the
check Pulsar's resource makes for the same path: a topic operation, a namespace operation, a tenant
operation, a namespace or topic policy (a tenant admin's business), tenant administration, or a
superuser. With ``--authorization``, :func:`authorization_middleware` answers a request its role
may not make with Pulsar's status (401 or 403, as Pulsar uses each) and reason, followed by who
lacked what on which resource; a role that is no superuser naming a tenant that does not exist is
answered 404, as Pulsar answers it. Names that do not parse are refused (412) before anything, as
Pulsar validates names first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web
from aiohttp.typedefs import Middleware

from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName, is_valid_name_part

from .admin_resource import BAD_TOPIC, error
from .authentication import ROLE
from .authorization import Authorizer, NamespaceOperation, Refusal, TenantNotFoundError, TopicOperation

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
H = TypeVar("H", bound=Callable[..., Awaitable[web.StreamResponse]])
_REQUIREMENT = "admin_requirement"
_BAD_NAMESPACE = "Namespace name is not valid"


class BadName(ValueError):
    """A path's name that does not parse; the message is Pulsar's reason."""


class Requirement(ABC):
    """What a path requires; :meth:`check` answers the refusal, None when the role may go on."""

    @abstractmethod
    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """The answer refusing ``role`` the request whose path holds ``names``; None: allowed."""


def _namespace(names: Mapping[str, str]) -> str:
    tenant, namespace = names["tenant"], names["namespace"]
    if not (is_valid_name_part(tenant) and is_valid_name_part(namespace)):
        raise BadName(_BAD_NAMESPACE)
    return f"{tenant}/{namespace}"


def _topic(names: Mapping[str, str]) -> TopicName:
    domain = names.get("domain", "persistent")
    try:
        return TopicName.parse(f"{domain}://{names['tenant']}/{names['namespace']}/{names['topic']}", strict=False)
    except InvalidTopicNameError:
        raise BadName(BAD_TOPIC) from None


def _refused(status: int, reason: str, refusal: Refusal | None) -> web.Response | None:
    return None if refusal is None else error(status, f"{reason}: {refusal}")


@dataclass(frozen=True)
class Anyone(Requirement):
    """No check (Pulsar's cluster list)."""

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Nothing to refuse."""
        return None


@dataclass(frozen=True)
class OnTopic(Requirement):
    """A topic operation (Pulsar's validateTopicOperation: 401), with the path's subscription if it has one."""

    operation: TopicOperation
    reason: str = "Unauthorized to validateTopicOperation for operation [{operation}] on topic [{topic}]"

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role's grants (or its admin rights) allow the operation."""
        topic = _topic(names)
        refusal = authorizer.topic_refusal(role, topic, self.operation, names.get("subscription"))
        return _refused(401, self.reason.format(operation=self.operation.value, topic=topic), refusal)


# Pulsar's HTTP lookup refuses with a reason of its own.
LOOKUP = OnTopic(TopicOperation.LOOKUP, "Don't have permission to connect to this namespace")


@dataclass(frozen=True)
class OnNamespace(Requirement):
    """A namespace operation (Pulsar's validateNamespaceOperation: 403)."""

    operation: NamespaceOperation

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role administers the tenant or (listing topics) has a namespace grant."""
        namespace = _namespace(names)
        reason = f"Unauthorized to validateNamespaceOperation for operation [{self.operation.value}] on namespace [{namespace}]"
        return _refused(403, reason, authorizer.namespace_refusal(role, namespace, self.operation))


@dataclass(frozen=True)
class NamespacePolicy(Requirement):
    """Reading or writing a namespace policy (Pulsar's validateNamespacePolicyOperation: 403, tenant admins)."""

    policy: str
    write: bool

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role administers the tenant."""
        namespace = _namespace(names)
        reason = (
            f"Unauthorized to validateNamespacePolicyOperation for operation [{'WRITE' if self.write else 'READ'}] "
            f"on namespace [{namespace}] on policy [{self.policy}]"
        )
        return _refused(403, reason, authorizer.tenant_refusal(role, names["tenant"]))


@dataclass(frozen=True)
class TopicPolicy(Requirement):
    """Reading or writing a topic policy (Pulsar's validateTopicPolicyOperation: 403, tenant admins)."""

    policy: str
    write: bool

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role administers the tenant."""
        topic = _topic(names)
        reason = (
            f"Unauthorized to validateTopicPolicyOperation for operation [{'WRITE' if self.write else 'READ'}] "
            f"on topic [{topic}] on policy [{self.policy}]"
        )
        return _refused(403, reason, authorizer.tenant_refusal(role, topic.tenant))


@dataclass(frozen=True)
class OnTenant(Requirement):
    """A tenant operation (Pulsar's validateTenantOperation: 401, tenant admins)."""

    operation: str

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role administers the tenant."""
        tenant = names["tenant"]
        reason = (
            f"Unauthorized to validateTenantOperation for originalPrincipal [null] and clientAppId [{role}] "
            f"about operation [{self.operation}] on tenant [{tenant}]"
        )
        return _refused(401, reason, authorizer.tenant_refusal(role, tenant))


@dataclass(frozen=True)
class TenantAdministration(Requirement):
    """Administering a tenant's resources (Pulsar's validateAdminAccessForTenant: 401; 404 when the
    tenant does not exist, whoever asks)."""

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role administers the tenant."""
        authorizer.check_tenant(names["tenant"])  # whoever asks, as Pulsar reads the tenant first
        reason = "Don't have permission to administrate resources on this tenant"
        return _refused(401, reason, authorizer.tenant_refusal(role, names["tenant"]))


@dataclass(frozen=True)
class SuperuserOrTenantAdmin(Requirement):
    """A tenant's own paths (Pulsar's validateBothSuperUserAndTenantOperation: 401 whatever failed)."""

    operation: str

    def check(self, authorizer: Authorizer, role: str, names: Mapping[str, str]) -> web.Response | None:
        """Refused unless the role is a superuser or an admin of the (existing) tenant."""
        tenant = names.get("tenant")
        try:
            refusal = authorizer.superuser_refusal(role) if tenant is None else authorizer.tenant_refusal(role, tenant)
        except TenantNotFoundError:
            refusal = Refusal(role, "is not a superuser, as needed for", f"tenant '{tenant}', which does not exist")
        reason = (
            "Unauthorized to validateBothTenantOperationAndSuperUser for originalPrincipal [null] and clientAppId "
            f"[{role}] about operation [{self.operation}] "
        )
        return _refused(401, reason, refusal)


def requires(requirement: Requirement) -> Callable[[H], H]:
    """Mark an admin handler with what its path requires of the caller's role."""

    def mark(handler: H) -> H:
        setattr(handler, _REQUIREMENT, requirement)
        return handler

    return mark


def requirement_of(handler: Callable[..., object]) -> Requirement | None:
    """The requirement a handler was marked with, None if it has none."""
    return getattr(handler, _REQUIREMENT, None)


def authorization_middleware(authorizer: Authorizer) -> Middleware:
    """An aiohttp middleware refusing requests their role may not make (after authentication)."""

    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.match_info.http_exception is not None:  # no route (404, 405): nothing to authorize
            return await handler(request)
        requirement = requirement_of(request.match_info.handler)
        if requirement is None:  # a path nobody declared a requirement for is refused, not let through
            return error(403, f"{request.method} {request.path}: no authorization rule serves this path")
        try:
            refused = requirement.check(authorizer, request[ROLE], request.match_info)
        except BadName as exc:
            return error(412, str(exc))
        except TenantNotFoundError as exc:
            return error(404, str(exc))
        return refused if refused is not None else await handler(request)

    return authorize
