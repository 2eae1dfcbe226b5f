"""Tenants, as Pulsar keeps them: a name and its TenantInfo (``adminRoles``, ``allowedClusters``).

Pulsar standalone starts with the tenants ``public`` (its default namespace's) and ``pulsar`` (its
system namespace's); more are created through ``PUT /admin/v2/tenants/{tenant}``. A namespace, and
so a topic, can only be made in a tenant that exists.
"""

from __future__ import annotations

from typing import Any

from .storage import Storage

__all__ = ["CLUSTER", "Tenants"]

# The one cluster a standalone broker belongs to, as Pulsar standalone names it.
CLUSTER = "standalone"
_BUILT_IN = ("public", "pulsar")


def default_info() -> dict[str, Any]:
    """The TenantInfo Pulsar standalone gives its built-in tenants."""
    return {"adminRoles": [], "allowedClusters": [CLUSTER]}


class Tenants:
    """The tenants and their TenantInfo, stored durably."""

    def __init__(self, storage: Storage):
        self._storage = storage
        self._tenants: dict[str, dict[str, Any]] = {}

    def load(self) -> None:
        """Read what the storage holds."""
        self._tenants = {name: default_info() for name in _BUILT_IN}
        self._tenants.update(self._storage.load_tenants())

    def names(self) -> set[str]:
        """Every tenant created (or built in)."""
        return set(self._tenants)

    def info(self, name: str) -> dict[str, Any] | None:
        """A tenant's TenantInfo, None if there is no such tenant."""
        info = self._tenants.get(name)
        return None if info is None else dict(info)

    async def create(self, name: str, info: dict[str, Any]) -> bool:
        """Create a tenant; False if it exists already."""
        if name in self._tenants:
            return False
        self._tenants[name] = info
        await self._storage.save_tenant(name, info)
        return True

    async def delete(self, name: str) -> bool:
        """Delete a tenant; False if there is none (a built-in one comes back at the next start,
        as Pulsar standalone recreates its default tenant)."""
        if self._tenants.pop(name, None) is None:
            return False
        await self._storage.delete_tenant(name)
        return True
