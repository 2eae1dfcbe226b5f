"""The broker's admin REST API: a subset of Pulsar's ``/admin/v2`` paths and JSON field names,
and its HTTP lookup (``/lookup/v2/topic/...``).

Errors answer 4xx with ``{"reason": ...}`` and Pulsar's own status and reason, so clients written
against a real cluster (the backlog sensor among them) read ours the same way. As with Pulsar, a
request body must be JSON: a PUT or POST carrying another content type is answered 415.

This module is the HTTP side (the application, its middlewares and the route table); the paths
are served by resources of their own: ``admin_namespaces`` (cluster, tenants, namespaces),
``admin_topics`` (lookup, topics, partitions, stats), ``admin_subscriptions`` (subscriptions
and message reads), ``admin_schemas`` (the schema registry and the schema policies),
``admin_permissions`` (grants), ``admin_compaction`` and ``admin_transactions``
(``/admin/v3/transactions``). What each path requires of the caller's role is declared on its
handler and checked, with ``--authorization``, by ``admin_authorization``. Requests a web page of
another site could send are refused before anything else by ``admin_browser_guard``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from airflow_pulsar.client.topic_name import InvalidTopicNameError

from .admin_authorization import authorization_middleware
from .admin_browser_guard import browser_guard
from .admin_compaction import Compactions
from .admin_namespaces import Namespaces, Tenants
from .admin_non_persistent import NonPersistentTopics
from .admin_permissions import Permissions
from .admin_resource import error
from .admin_schemas import Schemas
from .admin_subscriptions import Subscriptions
from .admin_topics import PersistentTopics, TopicLookup
from .admin_transactions import Transactions
from .authentication import AuthenticationService
from .service import BrokerService, TopicBusyError, TopicNotFoundError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except InvalidTopicNameError as exc:
        return error(412, str(exc))
    except TopicNotFoundError as exc:
        return error(404, str(exc))
    except TopicBusyError as exc:
        return error(412, str(exc))
    except LookupError as exc:
        return error(404, str(exc.args[0]) if exc.args else "not found")
    except ValueError as exc:
        return error(409, str(exc))


# The content types Pulsar's resources consume, by the end of the path; JSON for the others.
_CONSUMED: dict[str, tuple[str, ...] | None] = {
    "/skip_all": None,  # takes no body: anything goes
    "/partitions": ("application/json", "text/plain"),
    "/deduplicationEnabled": ("application/json", "text/plain"),
}


@web.middleware
async def _json_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Pulsar's admin resources consume JSON (a few also plain text): a PUT or POST with a body
    (or a content type) of another type is refused with 415 and no body, before anything else."""
    if request.method in ("PUT", "POST") and (request.headers.get("Content-Type") or request.can_read_body):
        suffix = "/" + request.path.rsplit("/", 1)[-1]
        accepted = _CONSUMED.get(suffix, ("application/json",))
        if accepted is not None and request.content_type not in accepted:
            return web.Response(status=415)
    return await handler(request)


class AdminApi:
    """aiohttp application serving the admin paths for one BrokerService."""

    def __init__(self, service: BrokerService, authentication: AuthenticationService | None = None):
        self.service = service
        authenticate: list[Middleware] = [authentication.http_middleware()] if authentication is not None else []
        authorize: list[Middleware] = [] if service.authorization is None else [authorization_middleware(service.authorization)]
        config = service.config
        guard = browser_guard("https" if config.tls else "http", config.host)
        # Web pages of other sites are refused first; then, as in Pulsar: credentials, the content
        # type, and what the role may do.
        self.app = web.Application(middlewares=[guard, *authenticate, _json_only, *authorize, _errors])
        resources = (
            TopicLookup, Tenants, Namespaces, Permissions, PersistentTopics, NonPersistentTopics, Subscriptions, Schemas, Compactions,
            Transactions,
        )
        self.app.add_routes([route for resource in resources for route in resource(service).routes()])
