"""Refuse, at import, an installed dependency outside the range this package declares.

A provider is installed into environments that already pin their own versions. A version outside
the declared range would fail later and far from its cause (a protobuf without an API the codec
uses kills the connection's reader thread), so importing the client names the package, the
version found and the range supported instead. The ranges are read from the installed package's
own metadata (``pyproject.toml``), so there is one place that states them.

Every import of the client pays for the check, so it reads as little as it can (about a
millisecond): one directory listing of each ``sys.path`` entry finds this package's
``.dist-info`` folder and each dependency's, whose name carries the version (the wheel format
requires it to match the metadata inside); this package's ranges are the ``Requires-Dist``
headers of its ``METADATA``, read up to the end of the headers; :mod:`.version_ranges` compares.
``importlib.metadata`` (some 20 ms to import) is asked only about a distribution that has no
``.dist-info`` folder in a directory on the path (an ``.egg-info`` install, a zip).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from .version_ranges import Version, VersionRange

__all__ = [
    "CLIENT_DEPENDENCIES",
    "DISTRIBUTION",
    "IncompatibleDependencyError",
    "Requirement",
    "check",
    "declared_requirements",
    "distribution_version",
]

DISTRIBUTION = "airflow-pulsar"
# What the client itself imports; checked when ``airflow_pulsar.client`` is imported. The embedded
# broker checks its own (``airflow_pulsar.broker``).
CLIENT_DEPENDENCIES = ("protobuf", "cramjam", "crc32c", "httpx", "fastavro", "cryptography")

# ``name [extras] specifiers ; marker``, the old ``name (specifiers)`` form too; a direct reference
# (``name @ url``) has no range to check.
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(@[^;]*|\(?[^;()@]*\)?)\s*(?:;\s*(.*))?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*(["'])([^"']+)\1\s*""")


class IncompatibleDependencyError(ImportError):
    """An installed dependency's version is outside the range airflow-pulsar supports."""


class Requirement:
    """One ``Requires-Dist`` of this package: a dependency's name, its range, and the extra that
    asks for it (None for a dependency of every installation)."""

    __slots__ = ("extra", "name", "versions")

    def __init__(self, name: str, versions: VersionRange, extra: str | None):
        self.name = name
        self.versions = versions
        self.extra = extra

    @classmethod
    def parse(cls, text: str) -> Requirement:
        """A ``Requires-Dist`` value; ValueError for a form the check does not read (a marker
        other than ``extra == "name"``), so that a new one in ``pyproject.toml`` fails its tests."""
        match = _REQUIREMENT.fullmatch(text)
        if match is None:
            raise ValueError(f"not a requirement the dependency check reads: {text!r}")
        name, versions, marker = match.groups()
        extra = None
        if marker is not None:
            extra_match = _EXTRA_MARKER.fullmatch(marker)
            if extra_match is None:
                raise ValueError(f"the dependency check reads only the marker extra == \"...\", not in {text!r}")
            extra = _normalize(extra_match[2])
        direct_reference = versions.startswith("@")
        return cls(name, VersionRange("" if direct_reference else versions.strip("()")), extra)


def check(names: Iterable[str], extra: str | None = None) -> None:
    """Raise :class:`IncompatibleDependencyError` if one of ``names`` (declared by this package,
    under ``extra`` if given) is installed at a version its requirement excludes.

    A dependency that is not installed passes (its import fails with its own message), and so
    does everything when this package is not installed (a source tree on the path).
    """
    wanted = {_normalize(name) for name in names}
    extra = None if extra is None else _normalize(extra)
    folders = _dist_info_folders(wanted | {_normalize(DISTRIBUTION)})
    for requirement in _requirements_in(folders.get(_normalize(DISTRIBUTION))):
        key = _normalize(requirement.name)
        if key not in wanted or requirement.extra != extra:
            continue
        found = _installed_version(requirement.name, folders.get(key))
        try:
            supported = found is None or Version.parse(found) in requirement.versions
        except ValueError:
            continue  # not a PEP 440 version: nothing to compare
        if not supported:
            wanted_text = f"{requirement.name}{requirement.versions}"
            raise IncompatibleDependencyError(
                f"{DISTRIBUTION} supports {wanted_text}, but this environment has {requirement.name} {found}; "
                f"install a version in that range, e.g. pip install '{wanted_text}'"
            )


def declared_requirements() -> list[Requirement]:
    """This package's requirements, from the ``METADATA`` of its first ``.dist-info`` folder on
    ``sys.path``; none when it is not installed."""
    return _requirements_in(_dist_info_folders({_normalize(DISTRIBUTION)}).get(_normalize(DISTRIBUTION)))


def distribution_version() -> str | None:
    """This package's installed version (pyproject.toml's, through its ``.dist-info`` folder); None
    where it is not installed, as in a Spark executor that was shipped the client's files alone."""
    name = _normalize(DISTRIBUTION)
    return _installed_version(DISTRIBUTION, _dist_info_folders({name}).get(name))


def _requirements_in(dist_info: Path | None) -> list[Requirement]:
    """The ``Requires-Dist`` headers of the ``METADATA`` in ``dist_info``, read up to the end of the
    headers (the description follows); ``importlib.metadata``'s when there is no such folder."""
    if dist_info is None:
        return [Requirement.parse(text) for text in _requires_without_dist_info()]
    declared = []
    with open(dist_info / "METADATA", encoding="utf-8") as metadata:
        for line in metadata:
            if not line.strip():
                break
            field, _, value = line.partition(":")
            if field.lower() == "requires-dist":
                declared.append(Requirement.parse(value.strip()))
    return declared


def _dist_info_folders(names: set[str]) -> dict[str, Path]:
    """The first ``NAME-VERSION.dist-info`` folder of each of ``names`` (normalized) on ``sys.path``."""
    found: dict[str, Path] = {}
    for entry in sys.path:
        directory = entry or os.curdir
        try:
            listing = os.listdir(directory)
        except OSError:  # a zip, or a path that does not exist
            continue
        for folder in listing:
            if folder.endswith(".dist-info"):
                name = _normalize(folder.partition("-")[0])
                if name in names and name not in found:
                    found[name] = Path(directory, folder)
        if len(found) == len(names):
            break
    return found


def _installed_version(name: str, dist_info: Path | None) -> str | None:
    """The version in the folder's name, else ``importlib.metadata``'s answer; None if not installed."""
    if dist_info is not None:
        return dist_info.name[: -len(".dist-info")].partition("-")[2]
    import importlib.metadata  # only for a distribution without a .dist-info folder: some 20 ms

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _requires_without_dist_info() -> list[str]:
    import importlib.metadata  # only where this package is not installed as a wheel or editable

    try:
        return importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return []


def _normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them: case, ``-``, ``_`` and ``.`` aside."""
    return re.sub(r"[-_.]+", "-", name).lower()
