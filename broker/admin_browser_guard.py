"""The admin API's guard against web pages: a page open in the user's browser may send requests
to the admin port (a POST without a body, such as ``skip_all``, needs no CORS preflight), so
the API refuses what only a page of another site would send.

- Origin: a browser names the page's origin (scheme, host and port) in an ``Origin`` header on
  every cross-origin request that can change something. The API's own origin is the scheme it is
  served with (``http``, or ``https`` with TLS) and the host and port the request was sent to
  (its ``Host`` header). A request whose Origin is another (``null`` included) gets 403; clients
  that are not browsers (the Pulsar admin tools, httpx, curl) send no Origin and are unaffected.
- Host: bound to a loopback address, the broker answers only to the names of this machine,
  ``localhost``, ``127.0.0.1`` and ``[::1]`` (with any port or none), and to the host it was
  bound to. Any other name is what a DNS-rebinding page sends (its own name, re-pointed at
  127.0.0.1, which makes its requests same-origin): 421, Misdirected Request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware
from yarl import URL

from .admin_resource import error
from .loopback import host_names, is_loopback

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# (scheme, host, port): what an origin and a Host header are compared by.
_Origin = tuple[str, str, int | None]


def browser_guard(scheme: str, bound_host: str) -> Middleware:
    """The middleware refusing cross-origin requests, and unknown Host names when ``bound_host``
    is a loopback address, for an API served with ``scheme`` (``http`` or ``https``)."""
    names = host_names(bound_host) if is_loopback(bound_host) else None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get(hdrs.HOST)
        addressed = _origin_of(f"{scheme}://{host}") if host is not None else None
        if names is not None and host is not None and (addressed is None or addressed[1] not in names):
            return error(
                421,
                f"Host {host!r} is not a name of this broker: bound to the loopback address {bound_host}, it answers "
                "to localhost, 127.0.0.1 and [::1] only (another name is what a DNS-rebinding web page sends)",
            )
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and (addressed is None or _origin_of(origin) != addressed):
            return error(
                403,
                f"cross-origin request refused: Origin {origin} is not this admin API's origin {scheme}://{host}; "
                "web pages of other sites may not call it",
            )
        return await handler(request)

    return guard


def _origin_of(url: str) -> _Origin | None:
    """The (scheme, lowercase host, port) of an origin or URL, the default port made explicit;
    None for what is not one (``null``, a bad host)."""
    try:
        parsed = URL(url)
    except ValueError:
        return None
    if not parsed.scheme or not parsed.host:
        return None
    return parsed.scheme.lower(), parsed.host.lower(), parsed.port
