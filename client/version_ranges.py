"""Versions and version ranges, as PEP 440 orders and matches them, for the dependency check.

Small on purpose: the client checks its dependencies' versions as it is imported, and the
``packaging`` library costs more to import than the whole check. It covers what requirement
metadata holds: versions with epoch, release, pre-, post- and dev-release and local label, and
the operators ``==`` (with ``.*``), ``!=`` (with ``.*``), ``<``, ``<=``, ``>``, ``>=`` and ``~=``.
Pre-releases count like any other version, as ``packaging``'s ``SpecifierSet.contains(version,
prereleases=True)`` has them; ``tests/unit/test_version_ranges.py`` holds the verdicts to its.
"""

from __future__ import annotations

import re

__all__ = ["Version", "VersionRange"]

_VERSION = re.compile(
    r"""v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|rc|c)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?""",
    re.VERBOSE,  # matched against the lower-cased text: IGNORECASE doubles the compile time
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_NONE = -1  # a post-release number that is absent sorts before post0
_AFTER = float("inf")  # an absent pre- or dev-release sorts after every present one
_SPECIFIER = re.compile(r"\s*(~=|==|!=|<=|>=|<|>)\s*([^\s,=<>!~][^\s,]*)\s*")


class Version:
    """A PEP 440 version; ``key`` orders versions as PEP 440 does, the local label aside.

    A plain class, as the others here: a dataclass costs a compile of its methods at import.
    """

    __slots__ = ("dev", "epoch", "local", "post", "pre", "release")

    def __init__(
        self,
        epoch: int,
        release: tuple[int, ...],
        pre: tuple[int, int] | None = None,
        post: int | None = None,
        dev: int | None = None,
        local: str | None = None,
    ):
        self.epoch = epoch
        self.release = release
        self.pre = pre  # (rank of a, b or rc; number)
        self.post = post
        self.dev = dev
        self.local = local

    @classmethod
    def parse(cls, text: str) -> Version:
        """The version ``text`` spells; ValueError if it is not a PEP 440 version."""
        match = _VERSION.fullmatch(text.strip().lower())
        if match is None:
            raise ValueError(f"not a PEP 440 version: {text!r}")
        pre_l, post_n = match["pre_l"], match["post_n1"] or match["post_n2"]
        return cls(
            epoch=int(match["epoch"] or 0),
            release=tuple(int(part) for part in match["release"].split(".")),
            pre=(_PRE_RANK[pre_l], int(match["pre_n"] or 0)) if pre_l else None,
            post=int(post_n or 0) if match["post_n1"] or match["post_l"] else None,
            dev=int(match["dev_n"] or 0) if match["dev_l"] else None,
            local=match["local"],
        )

    @property
    def key(self) -> tuple[object, ...]:
        """Orders versions: trailing zeros of the release do not count, a dev release of a final
        version comes before its pre-releases, and a pre-release before the final version."""
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        if self.pre is not None:
            pre: tuple[float, int] = self.pre
        else:
            pre = (-1, 0) if self.dev is not None and self.post is None else (_AFTER, 0)
        return (self.epoch, tuple(release), pre, _NONE if self.post is None else self.post, _AFTER if self.dev is None else self.dev)

    @property
    def is_prerelease(self) -> bool:
        """An alpha, beta, release candidate or dev release."""
        return self.pre is not None or self.dev is not None


class _Clause:
    __slots__ = ("operator", "prefix", "version")

    def __init__(self, operator: str, version: Version, prefix: bool):
        self.operator = operator
        self.version = version
        self.prefix = prefix  # ``==V.*`` or ``!=V.*``: matches every version whose release starts with V's

    def allows(self, candidate: Version) -> bool:
        op, spec = self.operator, self.version
        if op in ("==", "!="):
            equal = _starts_with(candidate, spec) if self.prefix else candidate.key == spec.key
            return equal if op == "==" else not equal
        if op == "~=":
            return candidate.key >= spec.key and _starts_with(candidate, Version(spec.epoch, spec.release[:-1]))
        if op == "<=":
            return candidate.key <= spec.key
        if op == ">=":
            return candidate.key >= spec.key
        if op == "<":  # V's pre-releases are out too, unless V is one: below V's first dev release
            bound = spec if spec.is_prerelease else Version(spec.epoch, spec.release, None, spec.post, 0)
            return candidate.key < bound.key
        # ">": V's post-releases and V with a local label are out too, unless V is a post- or dev release
        if candidate.key <= spec.key:
            return False
        if spec.post is not None or spec.dev is not None:
            return True
        return candidate.key[:2] != spec.key[:2] or candidate.pre != spec.pre


def _starts_with(candidate: Version, prefix: Version) -> bool:
    """Whether ``candidate``'s release, padded with zeros, begins with ``prefix``'s (same epoch)."""
    size = len(prefix.release)
    padded = candidate.release + (0,) * max(0, size - len(candidate.release))
    return candidate.epoch == prefix.epoch and padded[:size] == prefix.release


class VersionRange:
    """A comma-separated specifier set such as ``<8,>=5.29.1``: a version is in the range when
    every clause allows it; an empty text allows every version."""

    def __init__(self, text: str):
        self.text = text.strip()
        self._clauses = [_clause(part) for part in self.text.split(",")] if self.text else []

    def __contains__(self, version: Version) -> bool:
        return all(clause.allows(version) for clause in self._clauses)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"


def _clause(text: str) -> _Clause:
    match = _SPECIFIER.fullmatch(text)
    if match is None:
        raise ValueError(f"not a version specifier this check reads: {text!r}")
    operator, version = match.groups()
    prefix = version.endswith(".*")
    if prefix and operator not in ("==", "!="):
        raise ValueError(f"a '.*' version is only valid after == or !=: {text!r}")
    parsed = Version.parse(version[:-2] if prefix else version)
    if parsed.local is not None:
        raise ValueError(f"a local version label in a requirement is not read here: {text!r}")
    if prefix and (parsed.pre is not None or parsed.post is not None or parsed.dev is not None):
        raise ValueError(f"a '.*' version is a release only: {text!r}")
    if operator == "~=" and len(parsed.release) < 2:
        raise ValueError(f"~= needs a release of two parts or more: {text!r}")
    return _Clause(operator, parsed, prefix)
