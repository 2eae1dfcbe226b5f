"""Where the broker listens: whether only this machine can reach it, the names it answers to
there, and the warning when it listens elsewhere without authentication."""

from __future__ import annotations

import ipaddress
import socket

# The names a browser on this machine uses for it, as the Host header carries them (IPv6 without brackets).
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` (an address or a name) stands for is a loopback one:
    127.0.0.0/8 or ::1. An empty host or ``0.0.0.0`` (every interface) is not."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    if not host:
        return False
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (socket.gaierror, UnicodeError):
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.partition("%")[0]).is_loopback for a in addresses)


def host_names(bound_host: str) -> frozenset[str]:
    """The Host header names a broker bound to a loopback ``bound_host`` answers to, lowercase."""
    return LOOPBACK_NAMES | {bound_host.strip("[]").lower()}


def exposure_warning(host: str, port: int, http_port: int, authenticated: bool) -> str | None:
    """The warning for a broker that listens beyond this machine without authentication; None
    when it listens on loopback only or authenticates its clients."""
    if authenticated or is_loopback(host):
        return None
    return (
        f"listening on {host or 'every interface'} (not loopback) without authentication: anyone who can reach "
        f"ports {port} and {http_port} can read, write and delete every topic, and any web page open in a "
        "browser that reaches them can call the admin API; add --token-secret-file, --token-public-key, "
        "--basic-auth-conf or --tls-trust-certs-file, or bind --host 127.0.0.1"
    )
