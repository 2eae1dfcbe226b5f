"""Refuse, at import, an installed dependency outside the range this package declares.

A provider is installed into environments that already pin their own versions. A version outside
the declared range would fail later and far from its cause (a protobuf without an API the codec
uses kills the connection's reader thread), so importing the client names the package, the
version found and the range supported instead. The ranges are read from the installed package's
own metadata (``pyproject.toml``), so there is one place that states them.
"""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

DISTRIBUTION = "airflow-pulsar"
# What the client itself imports (pyjwt: the embedded broker's tokens); checked when
# ``airflow_pulsar.client`` is imported.
CLIENT_DEPENDENCIES = ("protobuf", "cramjam", "crc32c", "httpx", "aiohttp", "fastavro", "cryptography", "packaging", "pyjwt")


class IncompatibleDependencyError(ImportError):
    """An installed dependency's version is outside the range airflow-pulsar supports."""


def check(names: tuple[str, ...], extra: str | None = None) -> None:
    """Raise :class:`IncompatibleDependencyError` if one of ``names`` (declared by this package,
    under ``extra`` if given) is installed at a version its requirement excludes."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return
    for text in declared:
        requirement = Requirement(text)
        if requirement.name not in names or not _applies(requirement, extra):
            continue
        try:
            found = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a missing module fails its own import, with its own message
        try:
            supported = requirement.specifier.contains(Version(found), prereleases=True)
        except InvalidVersion:
            continue
        if not supported:
            wanted = f"{requirement.name}{requirement.specifier}"
            raise IncompatibleDependencyError(
                f"{DISTRIBUTION} supports {wanted}, but this environment has {requirement.name} {found}; "
                f"install a version in that range, e.g. pip install '{wanted}'"
            )


def _applies(requirement: Requirement, extra: str | None) -> bool:
    if requirement.marker is None:
        return extra is None
    return requirement.marker.evaluate({"extra": extra or ""})
